"""What a search answers: hits with their passage, ranks and metadata (made safe to serialise), the rerank
stage's report, and the single and batch responses."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator


class Ranks(BaseModel):
    dense: int | None
    bm25: int | None


class PassageRef(BaseModel):
    id: int
    index: int
    start: int
    end: int


# Whatever a collection holds, a response must serialise: pydantic gives up past ~255 levels, and JSON has no
# NaN. Ingest bounds new metadata far below this; older or foreign data is cleaned on the way out.
MAX_RESPONSE_METADATA_DEPTH = 128


class _TooDeep(Exception):
    pass


def _clean(value: Any, depth: int) -> Any:
    if isinstance(value, dict | list):
        if depth >= MAX_RESPONSE_METADATA_DEPTH:
            raise _TooDeep
        if isinstance(value, dict):
            return {str(k): _clean(v, depth + 1) for k, v in value.items()}
        return [_clean(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def response_metadata(value: Any) -> dict[str, Any]:
    """Stored metadata as a response can carry it: non-finite numbers become null; metadata nested deeper than
    the response limit is replaced by a note (the hit itself is still returned)."""
    if not isinstance(value, dict):
        return {}
    try:
        cleaned: dict[str, Any] = _clean(value, 1)
    except _TooDeep:
        return {"_error": f"metadata not returned: nested deeper than {MAX_RESPONSE_METADATA_DEPTH} levels"}
    return cleaned


class HitOut(BaseModel):
    id: str
    score: float
    title: str
    text: str
    metadata: dict[str, Any]

    @field_validator("metadata", mode="before")
    @classmethod
    def _serialisable(cls, v: Any) -> dict[str, Any]:
        return response_metadata(v)

    passage: PassageRef
    ranks: Ranks
    rerank_score: float | None = Field(None, description="cross-encoder score (the order) when reranked")
    highlights: list[tuple[int, int]] | None = Field(
        None,
        description="with highlight: [start, end) character offsets in `text` of the words that match a query term "
        "(lowercased, stopwords dropped, stemmed: as BM25 matches them)",
    )


class RerankInfo(BaseModel):
    model: str = Field(
        ...,
        description="the reranker: the registry name a request gave, else the server's default (VELA_RERANKER) by its "
        "registry name, or `unregistered` for a folder outside the registry; never a server path",
    )
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
