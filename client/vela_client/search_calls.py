"""Typed arguments to the search `Call`s (search, batch search, recommend), shared by the sync and async clients.

Options left as None are not sent, so the server's defaults (and any it changes later) apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from pydantic import BaseModel

from vela_client import routes
from vela_client.calls import _model, _set
from vela_client.models import BatchSearchResponse, Dim, Fusion, Mode, Rerank, SearchResponse
from vela_client.routes import Call

RerankLike = Rerank | Mapping[str, Any]
FusionLike = Fusion | Mapping[str, Any]


class SearchOptions(TypedDict, total=False):
    """Keyword options of `search` and `search_batch` (see the API reference for each one's meaning and default)."""

    k: int
    mode: Mode
    dim: Dim | int
    rrf_k: int
    depth: int
    weights: Mapping[str, float]
    group_by_doc: bool
    rescore: bool
    rerank: RerankLike
    fusion: FusionLike
    filter: Mapping[str, Any]
    offset: int
    score_threshold: float
    highlight: bool
    group_by: Mapping[str, Any]  # {"key": field, "size": hits per value, "depth": documents drawn from}
    with_text: bool
    with_metadata: bool | Sequence[str]


def search_options(collection: str, options: SearchOptions) -> dict[str, Any]:
    """The options `search` and `search_batch` share, as the request body holds them."""
    unknown = sorted(set(options) - set(SearchOptions.__annotations__))
    if unknown:
        raise TypeError(f"unknown search options: {', '.join(unknown)}")
    body: dict[str, Any] = {"collection": collection}
    for key, value in options.items():
        if value is None:
            continue
        if key == "dim":
            value = str(value)  # the API spells the small index "256", a string
        elif isinstance(value, BaseModel):
            value = value.model_dump(exclude_none=True)
        elif isinstance(value, Mapping):
            value = dict(value)
        body[key] = value
    return body


def search(query: str, options: dict[str, Any]) -> Call[SearchResponse]:
    return routes.SEARCH.call(_model(SearchResponse), json={**options, "query": query})


def search_batch(queries: Iterable[str], options: dict[str, Any]) -> Call[BatchSearchResponse]:
    if isinstance(queries, str):  # a str is an iterable of one-letter queries: surely a mistake
        raise TypeError("queries must be a list of strings, not one string (use search for one query)")
    return routes.SEARCH_BATCH.call(_model(BatchSearchResponse), json={**options, "queries": list(queries)})


def recommend(
    collection: str,
    like: Iterable[str],
    unlike: Iterable[str] | None,
    k: int | None,
    offset: int | None,
    filter: Mapping[str, Any] | None,
    score_threshold: float | None,
    with_text: bool | None = None,
    with_metadata: bool | Sequence[str] | None = None,
    group_by: Mapping[str, Any] | None = None,
) -> Call[SearchResponse]:
    for name, ids in (("like", like), ("unlike", unlike)):
        if isinstance(ids, str):  # a str is an iterable of one-letter ids: surely a mistake
            raise TypeError(f"{name} must be a list of document ids, not one string (write [{ids!r}])")
    body = _set(
        collection=collection,
        like=list(like),
        unlike=list(unlike) if unlike is not None else None,
        k=k,
        offset=offset,
        filter=dict(filter) if filter is not None else None,
        score_threshold=score_threshold,
        with_text=with_text,
        with_metadata=with_metadata if isinstance(with_metadata, bool | None) else list(with_metadata),
        group_by=dict(group_by) if group_by is not None else None,
    )
    return routes.RECOMMEND.call(_model(SearchResponse), json=body)
