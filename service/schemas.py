"""Request and response bodies of the HTTP API (they make the OpenAPI schema at /docs)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from indexing.collection import MAX_SHARDS, NAME_RE

CollectionName = Field(
    ..., min_length=1, max_length=64, pattern=NAME_RE.pattern, examples=["scifact"], description="collection name"
)


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(..., min_length=1, max_length=512)
    text: str
    title: str | None = Field(None, max_length=10_000)
    metadata: dict[str, Any] | None = None

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("document text must not be empty")
        return v


class IndexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collection: str = CollectionName
    documents: list[Document] = Field(..., min_length=1)
    embedder: str | None = Field(
        None, description="embedder of a new collection ('default' or a local model directory); ignored after"
    )
    shards: int | None = Field(
        None,
        ge=1,
        le=MAX_SHARDS,
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
    created_at: float
    started_at: float | None
    finished_at: float | None


class JobAccepted(BaseModel):
    job_id: str
    status: str
    url: str


class RerankOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="reranker directory (a `vela train reranker` output); unset: the server's VELA_RERANKER",
    )
    top_n: int = Field(50, ge=1, le=1000, description="fused hits the cross-encoder rescores (k is returned)")
    max_ms: float | None = Field(
        None,
        gt=0,
        le=600_000,
        description="time budget of the rerank step per query; past it the fused order is returned with "
        "rerank.status 'timeout'. Unset: the server's VELA_RERANK_MAX_MS",
    )
    weight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="the cross-encoder's share of the new order: 1 sorts by its score alone; below 1, a weighted "
        "RRF of its ranking (this weight) and the fused ranking (1 - weight). Unset: the server's VELA_RERANK_WEIGHT",
    )


class SearchOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collection: str = CollectionName
    k: int = Field(10, ge=1, le=1000, description="hits to return")
    mode: Literal["dense", "bm25", "hybrid"] = "hybrid"
    dim: Literal["full", "256"] = Field("full", description="dense index: full dims, or 256-d then full rescore")
    rrf_k: int = Field(60, ge=1, le=10_000)
    depth: int = Field(200, ge=1, le=10_000, description="each list is cut to this depth before fusion")
    weights: dict[Literal["dense", "bm25"], float] | None = Field(None, description="per-list RRF weights")
    group_by_doc: bool = Field(True, description="one hit per document (its best passage)")
    rescore: bool = Field(True, description="dim=256: rescore the 256-d shortlist with the full vectors")
    rerank: RerankOptions | None = Field(None, description="rescore the top fused hits with a cross-encoder")

    @field_validator("weights")
    @classmethod
    def _weights_non_negative(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None and any(w < 0 for w in v.values()):
            raise ValueError("weights must be >= 0")
        return v


def _query_not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("query must not be empty")
    return v


class SearchRequest(SearchOptions):
    query: str = Field(..., max_length=10_000)
    _check = field_validator("query")(_query_not_blank)


class BatchSearchRequest(SearchOptions):
    queries: list[str] = Field(..., min_length=1)

    @field_validator("queries")
    @classmethod
    def _queries_not_blank(cls, v: list[str]) -> list[str]:
        for i, q in enumerate(v):
            if not q.strip():
                raise ValueError(f"query {i} must not be empty")
            if len(q) > 10_000:
                raise ValueError(f"query {i} is longer than 10000 characters")
        return v


class Ranks(BaseModel):
    dense: int | None
    bm25: int | None


class PassageRef(BaseModel):
    id: int
    index: int
    start: int
    end: int


class HitOut(BaseModel):
    id: str
    score: float
    title: str
    text: str
    metadata: dict[str, Any]
    passage: PassageRef
    ranks: Ranks
    rerank_score: float | None = Field(None, description="cross-encoder score (the order) when reranked")


class RerankInfo(BaseModel):
    model: str = Field(..., description="the reranker directory")
    status: Literal["ok", "timeout", "error"] = Field(
        ..., description="ok: hits are in reranked order; timeout or error: in fused order, as without rerank"
    )
    top_n: int
    scored: int = Field(..., description="pairs the cross-encoder scored")
    took_ms: float
    error: str | None = Field(None, description="why the fused order was kept")
    weight: float = Field(..., description="the cross-encoder's share of the order (1: its score alone)")


class SearchResponse(BaseModel):
    hits: list[HitOut]
    took_ms: float
    rerank: RerankInfo | None = Field(None, description="how the rerank stage went, when one was asked for")


class BatchSearchResponse(BaseModel):
    results: list[SearchResponse]
    took_ms: float


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


class CollectionList(BaseModel):
    collections: list[CollectionOut]


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody
