"""Request and response bodies of the document API: get, scroll, patch, count, and declaring metadata fields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from service.filter_schema import FilterField, FilterJson
from service.schemas import REQUEST_CONFIG, UnicodeBody
from service.search_schemas import response_metadata

MAX_SCROLL_LIMIT = 1000


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


class PatchRequest(UnicodeBody):
    model_config = REQUEST_CONFIG
    metadata: dict[str, Any] = Field(
        ...,
        description="merge: these keys replace the stored ones (a key set to null is stored as null); "
        "replace: the document's whole metadata. Bounded like metadata at /index (VELA_MAX_METADATA_*)",
    )
    mode: Literal["merge", "replace"] = Field("merge", description="merge (a shallow update) or replace")


class CountRequest(UnicodeBody):
    model_config = REQUEST_CONFIG
    filter: FilterJson = FilterField


class CountResponse(BaseModel):
    count: int = Field(
        ..., description="documents of the searchable (committed) index with a live passage that passes the filter"
    )
