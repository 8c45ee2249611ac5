"""Request and response bodies of the HTTP API (they make the OpenAPI schema at /docs)."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import JsonDict

from indexing.collection import NAME_RE, check_schema
from indexing.shard_budget import MAX_SHARDS_PER_COLLECTION

# Every request body refuses extra fields and non-finite numbers (Infinity/NaN would reach scores and sorting).
# Strict: no coercion the schema does not promise ("rescore": 0 or "k": "10" are refused, as the schema says).
REQUEST_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

# "Not blank", spelled out so that the OpenAPI pattern (ECMA regex), pydantic and Python agree on what is blank:
# the characters str.isspace() calls whitespace, plus the BOM.
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
NOT_BLANK = f"[^{_SPACE}]"
_NOT_BLANK = re.compile(NOT_BLANK)
# Schema only: the check itself is the validators' (their messages say what to fix).
_NOT_BLANK_SCHEMA: JsonDict = {"minLength": 1, "pattern": NOT_BLANK}


def _not_blank(v: str, what: str) -> str:
    if not _NOT_BLANK.search(v):
        raise ValueError(f"{what} must not be empty")
    return v


def lone_surrogate_at(value: Any) -> str | None:
    """Where a parsed JSON value holds a string that is not Unicode text: a lone UTF-16 surrogate, which JSON's
    `\\ud800`-`\\udfff` escapes can spell but UTF-8 cannot encode (it would fail later, in the tokenizer or the
    store). None when there is none; the check is one C-speed dump, and only a failure walks the value."""
    try:
        json.dumps(value, ensure_ascii=False).encode()
        return None
    except (UnicodeEncodeError, TypeError, ValueError):  # or not plain JSON (a model built in Python): walk it
        pass
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in v):
                return path
        elif isinstance(v, dict):
            for k, x in v.items():
                # The value's path shows its key as the key's own path does when the key is not plain text: a
                # message must itself be Unicode text.
                shown = str(k) if not isinstance(k, str) or lone_surrogate_at(k) is None else repr(k)
                stack.extend([(k, f"{path}.{k!r}" if path else repr(k)), (x, f"{path}.{shown}" if path else shown)])
        elif isinstance(v, list):
            stack.extend((x, f"{path}.{i}" if path else str(i)) for i, x in enumerate(v))
    return None


class UnicodeBody(BaseModel):
    """A request body whose every string (metadata keys and values included) is Unicode text."""

    @model_validator(mode="before")
    @classmethod
    def _unicode_only(cls, data: Any) -> Any:
        where = lone_surrogate_at(data)
        if where is not None:
            raise ValueError(f"{where}: not Unicode text (a lone UTF-16 surrogate, such as \\udc00)")
        return data


CollectionName = Field(
    ..., min_length=1, max_length=64, pattern=NAME_RE.pattern, examples=["scifact"], description="collection name"
)


class Document(BaseModel):
    model_config = REQUEST_CONFIG
    id: str = Field(
        ..., min_length=1, max_length=512, description="any string; per-document paths take it percent-encoded"
    )
    text: str = Field(..., json_schema_extra=_NOT_BLANK_SCHEMA, description="not blank")
    title: str | None = Field(None, max_length=10_000)
    metadata: dict[str, Any] | None = Field(
        None,
        description="returned with every hit; bounded in depth, keys, values and JSON size (VELA_MAX_METADATA_*), "
        "finite numbers only",
    )

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, v: str) -> str:
        return _not_blank(v, "document text")


class CollectionSchema(UnicodeBody):
    model_config = REQUEST_CONFIG
    fields: dict[
        Annotated[str, Field(min_length=1, max_length=256)],
        Literal["keyword", "integer", "float", "boolean", "datetime"],
    ] = Field(
        default_factory=dict,
        max_length=64,
        description='declared metadata fields, e.g. {"tenant": "keyword", "year": "integer", '
        '"published": "datetime"}; a document\'s value must have the type (or be a list of such values, or null). '
        'A nested field by its dotted path ("author.born"): a name holding [] is refused',
    )
    strict: bool = Field(False, description="filters may name declared fields only")

    @field_validator("fields")
    @classmethod
    def _dotted_names(cls, v: dict[str, str]) -> dict[str, str]:
        # The engine's own rules (a name holding `[]` could never be named by a filter), here so that every route
        # taking a schema refuses it with a 422 before a collection is made or a job queued.
        check_schema({"fields": v})
        return v


class SchemaUpdate(CollectionSchema):
    """The whole new schema of a collection: `fields` is required (`{}` to declare none), so that an empty or cut
    body does not drop every declared field."""

    fields: dict[  # type: ignore[assignment]
        Annotated[str, Field(min_length=1, max_length=256)],
        Literal["keyword", "integer", "float", "boolean", "datetime"],
    ] = Field(
        ...,
        max_length=64,
        description='every declared metadata field, e.g. {"tenant": "keyword", "year": "integer"}: the whole new '
        "schema (a field left out is no longer declared; {} declares none); a nested field by its dotted path, "
        "never with []",
    )


class IndexRequest(UnicodeBody):
    model_config = REQUEST_CONFIG
    collection: str = CollectionName
    documents: list[Document] = Field(..., min_length=1)
    embedder: str | None = Field(
        None,
        description="embedder of a new collection, by registry name ('default' or a name GET /models lists); "
        "ignored after",
    )
    schema_: CollectionSchema | None = Field(
        None,
        alias="schema",
        description="typed metadata fields of a new collection, indexed for filters; an existing collection "
        "must have this schema (409 otherwise; change it with PUT /collections/{name}/schema)",
    )
    shards: int | None = Field(
        None,
        ge=1,
        le=MAX_SHARDS_PER_COLLECTION,
        description="shards of a new collection (documents split by a hash of their id); unset: 1. "
        "An existing collection must have this many (409 otherwise)",
    )

    @model_validator(mode="after")
    def _unique_ids(self) -> IndexRequest:
        counts = Counter(d.id for d in self.documents)
        dups = sorted(i for i, n in counts.items() if n > 1)
        if dups:
            raise ValueError(f"duplicate document ids in one request: {dups[:10]}")
        return self


class CollectionCreate(UnicodeBody):
    """An empty collection's settings: what the first POST /index of a collection may name."""

    model_config = REQUEST_CONFIG
    embedder: str | None = Field(
        None, description="embedder, by registry name ('default' or a name GET /models lists); unset: the default"
    )
    schema_: CollectionSchema | None = Field(
        None,
        alias="schema",
        description="typed metadata fields, indexed for filters (change later with PUT .../schema)",
    )
    shards: int | None = Field(
        None,
        ge=1,
        le=MAX_SHARDS_PER_COLLECTION,
        description="shards (documents split by a hash of their id); unset: 1",
    )


class JobOut(BaseModel):
    id: str
    collection: str
    kind: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    done: int
    total: int
    docs_per_s: float | None
    eta_s: float | None
    error: str | None
    worker: str | None = Field(None, description="the worker that runs (or last ran) the job")
    attempts: int = Field(0, description="how many times a worker started it (more than 1 after a crash)")
    cancel_requested: bool = Field(
        False, description="a cancel was asked for: a running job stops at its next batch (one in its last finishes)"
    )
    created_at: float
    started_at: float | None
    finished_at: float | None
    result: dict[str, Any] | None = Field(
        None, description="what the job reports beyond counts: a reindex's generation and its gate's NDCG@10 figures"
    )


class JobList(BaseModel):
    jobs: list[JobOut]
    next_cursor: str | None = Field(None, description="pass it as `cursor` for the next page; null at the end")


class JobAccepted(BaseModel):
    job_id: str
    status: str
    url: str


class CollectionOut(BaseModel):
    name: str
    documents: int
    passages: int
    embedder: str
    dims: dict[str, int]
    index: dict[str, Any]
    chunking: dict[str, int]
    created_at: float
    shards: int = Field(1, description="shards the documents are split over (index.shards has each one's counts)")
    schema_: dict[str, Any] = Field(
        default_factory=lambda: {"fields": {}, "strict": False},
        alias="schema",
        description="declared metadata fields and whether filters are strict",
    )
    fusion: dict[str, Any] = Field(
        default_factory=lambda: {"method": "rrf"},
        description="how hybrid searches fuse dense and BM25 by default, and how it was chosen (without labels)",
    )
    generations: dict[str, Any] | None = Field(
        None,
        description="the generation searches read (current), the one kept for rollback (previous) and one being "
        "built, each with its embedder (GET /collections/{name} only; null in the list)",
    )
    aliases: list[str] = Field(default_factory=list, description="the aliases that point at this collection, sorted")


class CollectionList(BaseModel):
    collections: list[CollectionOut]


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None
    request_id: str | None = Field(None, description="also the X-Request-ID header and in the server's log")


class ErrorResponse(BaseModel):
    error: ErrorBody
