"""Request and response bodies of the document API: get (one or many), scroll, patch, delete many, count, and
declaring metadata fields."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from service.filter_schema import FilterField, FilterJson, NonEmptyFilterJson
from service.schemas import REQUEST_CONFIG, UnicodeBody
from service.search_schemas import response_metadata

MAX_SCROLL_LIMIT = 1000
MAX_GET_IDS = 1000


class PassageSpan(BaseModel):
    id: int = Field(..., description="the passage id (search hits name it in passage.id)")
    index: int = Field(..., description="position of the passage in the document, from 0")
    start: int = Field(..., description="character offset of the passage in text")
    end: int = Field(..., description="character offset just past the passage")


class StoredDocumentOut(BaseModel):
    id: str
    title: str = Field(..., description="as indexed ('' when none was given)")
    text: str
    metadata: dict[str, Any] = Field(..., description="the latest stored metadata (PATCH changes it at once)")

    @field_validator("metadata", mode="before")
    @classmethod
    def _serialisable(cls, v: Any) -> dict[str, Any]:
        return response_metadata(v)


class DocumentOut(StoredDocumentOut):
    passages: list[PassageSpan] = Field(..., description="the document's passages, in order")


class ScrollResponse(BaseModel):
    documents: list[StoredDocumentOut] = Field(
        ..., description="documents in id order (without passages: GET one document for them)"
    )
    next_cursor: str | None = Field(
        ...,
        description="pass it as `cursor` for the next page; null once the scroll has reached the last document. "
        "A page may hold fewer than `limit` documents (even none) and still have a next_cursor: each request "
        "scans a bounded number of documents",
    )


class GetDocumentsRequest(UnicodeBody):
    model_config = REQUEST_CONFIG
    ids: list[Annotated[str, Field(min_length=1, max_length=512)]] = Field(
        ..., min_length=1, max_length=MAX_GET_IDS, description="document ids (an id given twice is returned once)"
    )
    passages: bool = Field(False, description="also each document's passages (ids and character offsets)")


class GetDocumentsResponse(BaseModel):
    documents: list[DocumentOut | StoredDocumentOut] = Field(
        ..., description="the documents found, in the order of `ids` (with `passages` when asked)"
    )
    not_found: list[str] = Field(..., description="the ids of no document, in the order of `ids`")


class PatchRequest(UnicodeBody):
    model_config = REQUEST_CONFIG
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="merge: these keys replace the stored ones (a key set to null is stored as null); "
        "replace: the document's whole metadata. Bounded like metadata at /index (VELA_MAX_METADATA_*)",
    )
    mode: Literal["merge", "replace"] = Field("merge", description="merge (a shallow update) or replace")
    unset: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list,
        max_length=64,
        description="merge only: top-level keys removed from the stored metadata (after `metadata` is merged; a "
        "key in both is refused), as Qdrant's delete_payload; a key not stored is skipped",
    )

    @model_validator(mode="after")
    def _unset_with_merge(self) -> PatchRequest:
        if "metadata" not in self.model_fields_set and not self.unset:
            raise ValueError("metadata or unset is required: the keys to set, or those to remove")
        if self.unset and self.mode == "replace":  # replace already drops every key it does not give
            raise ValueError("unset: with mode replace, leave the keys out of metadata instead")
        both = sorted(set(self.unset) & set(self.metadata))
        if both:
            raise ValueError(f"unset: {both[0]!r} is also in metadata: set it or remove it, not both")
        return self


_IDS_SCHEMA = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 512}, "minItems": 1}


class DeleteDocumentsRequest(UnicodeBody):
    """Exactly one of `ids` and `filter`."""

    model_config = ConfigDict(
        **REQUEST_CONFIG, json_schema_extra={"oneOf": [{"required": ["ids"]}, {"required": ["filter"]}]}
    )
    ids: Annotated[list[Annotated[str, Field(min_length=1, max_length=512)]] | None, WithJsonSchema(_IDS_SCHEMA)] = (
        Field(
            None,
            min_length=1,
            description="these documents (at most VELA_MAX_BATCH_DOCUMENTS); an id that is not stored is skipped",
        )
    )
    filter: NonEmptyFilterJson = Field(
        None,
        description="every document whose stored metadata passes this filter when the job runs (see the Filter "
        "schema). Not {}: delete the collection to remove it with every document",
    )

    def _given(self) -> set[str]:
        return {k for k in ("ids", "filter") if getattr(self, k) is not None}

    @model_validator(mode="after")
    def _one_of(self) -> DeleteDocumentsRequest:
        no_filter = self.filter is None or self.filter == {}  # any other value is a filter, parsed (and refused) later
        if self.ids is not None and not no_filter:
            raise ValueError("give ids or a filter, not both: send two requests to delete both sets")
        if self.ids is None and no_filter or {"ids", "filter"} & self.model_fields_set - self._given():
            raise ValueError("give either ids or a non-empty filter (not null)")
        return self


class CountRequest(UnicodeBody):
    model_config = REQUEST_CONFIG
    filter: FilterJson = FilterField


class CountResponse(BaseModel):
    count: int = Field(
        ..., description="documents of the searchable (committed) index with a live passage that passes the filter"
    )


MAX_FACET_LIMIT = 1000


class FacetRequest(UnicodeBody):
    model_config = REQUEST_CONFIG
    key: str = Field(
        ..., min_length=1, max_length=256, description="a declared keyword, integer or boolean metadata field"
    )
    filter: FilterJson = FilterField
    limit: int = Field(10, ge=1, le=MAX_FACET_LIMIT, description="the most frequent values to return")


class FacetHit(BaseModel):
    value: bool | int | str = Field(..., description="a value of the field")
    count: int = Field(..., description="documents that hold it (a list value counts under each of its items)")


class FacetResponse(BaseModel):
    key: str
    hits: list[FacetHit] = Field(..., description="the most frequent values first; ties by value, ascending")
    distinct_values: int = Field(..., description="how many values the passing documents hold, all told")
