from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import Any

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from indexing.collection import CollectionNotFound
from service.deps import State
from service.errors import ApiError, parse_request_filter, shown
from service.limits import check_response_size, check_search_work
from service.model_registry import ModelKindMismatch, UnknownModelName, UnusableModel, request_model
from service.rerank import NoReranker, Reranking, UnknownReranker, prepare_rerank
from service.schemas import BatchSearchRequest, ErrorResponse, SearchOptions, SearchRequest
from service.search import SearchResult, search_batch
from service.search_schemas import BatchSearchResponse, HitOut, PassageRef, Ranks, RerankInfo, SearchResponse
from service.state import AppState

router = APIRouter(prefix="/search", tags=["search"])
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse},
    413: {"model": ErrorResponse, "description": "the request asks for more work or a larger response than allowed"},
    422: {"model": ErrorResponse},
}


def _bounded(state: AppState, response: SearchResponse | BatchSearchResponse) -> Response:
    """The serialised response, refused (413) past VELA_MAX_RESPONSE_BYTES instead of being sent."""
    body = response.model_dump_json().encode()
    check_response_size(state.settings, len(body))
    return Response(body, media_type="application/json")


def _to_response(result: SearchResult) -> SearchResponse:
    return SearchResponse(
        hits=[
            HitOut(
                id=h.id,
                score=h.score,
                title=h.title,
                text=h.text,
                metadata=h.metadata,
                passage=PassageRef(id=h.passage_id, index=h.passage_index, start=h.start, end=h.end),
                ranks=Ranks(dense=h.ranks.get("dense"), bm25=h.ranks.get("bm25")),
                rerank_score=h.rerank_score,
            )
            for h in result.hits
        ],
        took_ms=result.took_ms,
        rerank=RerankInfo(**dataclasses.asdict(result.rerank)) if result.rerank is not None else None,
    )


async def _run(state: AppState, opts: SearchOptions, queries: list[str]) -> list[SearchResult]:
    try:
        coll = state.collections.get(opts.collection)
    except CollectionNotFound as exc:
        raise ApiError(404, "collection_not_found", f"no collection named {shown(opts.collection)}") from exc
    node = parse_request_filter(opts.filter, coll.settings.schema)
    embedder = state.query_encoders.get(coll.settings.embedder) if opts.mode != "bm25" else None
    rerank: Reranking | None = None
    if opts.rerank is not None:
        try:  # looks the name up in the registry and loads the model on its first use: off the event loop
            model = opts.rerank.model
            if model is not None:  # a registry name; the server's default (VELA_RERANKER) is the operator's
                lookup = partial(request_model, settings=state.settings, kind="reranker", field="rerank.model")
                model = await run_in_threadpool(lookup, name=model)
            rerank = await run_in_threadpool(
                prepare_rerank,
                cache=state.rerankers,
                model=model,
                label=opts.rerank.model,
                default_model=state.settings.reranker,
                top_n=opts.rerank.top_n,
                max_ms=opts.rerank.max_ms or state.settings.rerank_max_ms,
                batch_size=state.settings.rerank_batch_size,
                weight=state.settings.rerank_weight if opts.rerank.weight is None else opts.rerank.weight,
                rrf_k=opts.rrf_k,
            )
        except UnknownModelName as exc:
            raise ApiError(422, "unknown_model", str(exc)) from exc
        except (ModelKindMismatch, UnusableModel) as exc:
            raise ApiError(422, "invalid_model", str(exc)) from exc
        except UnknownReranker as exc:
            raise ApiError(422, "unknown_reranker", str(exc)) from exc
        except NoReranker as exc:
            raise ApiError(422, "no_reranker", str(exc)) from exc
    start = time.perf_counter()
    # Encoding and index scans are CPU work: keep them off the event loop.
    results = await run_in_threadpool(
        partial(search_batch, collection=coll, fanout=state.collections.fanout),
        embedder=embedder,
        queries=queries,
        k=opts.k,
        mode=opts.mode,
        dim=opts.dim,
        rrf_k=opts.rrf_k,
        depth=opts.depth,
        weights={str(k): v for k, v in opts.weights.items()} if opts.weights else None,
        group_by_doc=opts.group_by_doc,
        rescore=opts.rescore,
        rerank=rerank,
        filter=node,
        offset=opts.offset,
        fusion=opts.fusion.model_dump(exclude_none=True) if opts.fusion is not None else None,
    )
    for r in results:
        if r.rerank is not None:
            state.metrics.observe_rerank(status=r.rerank.status, pairs=r.rerank.scored, seconds=r.rerank.took_ms / 1000)
    state.metrics.search_latency.labels(opts.mode, opts.dim).observe(time.perf_counter() - start)
    state.metrics.search_queries.labels(opts.mode, opts.dim).inc(len(queries))
    return results


@router.post("", response_model=SearchResponse, responses=ERRORS)
async def search(body: SearchRequest, state: State) -> Response:
    """Dense, BM25 or hybrid search over one collection. Hybrid fuses the two lists as the collection's stored
    choice says (RRF until one is chosen; GET /collections/{name} shows it), or as the request's `fusion` says."""
    check_search_work(state.settings, queries=[body.query], k=body.k + body.offset, depth=body.depth)
    (result,) = await _run(state, body, [body.query])
    return _bounded(state, _to_response(result))


@router.post("/batch", response_model=BatchSearchResponse, responses=ERRORS)
async def search_many(body: BatchSearchRequest, state: State) -> Response:
    """Many queries with the same options, in one encoder batch. The work of one request is bounded: queries,
    k x queries, depth x queries and query characters (413 names the limit)."""
    check_search_work(state.settings, queries=body.queries, k=body.k + body.offset, depth=body.depth)
    start = time.perf_counter()
    results = await _run(state, body, body.queries)
    return _bounded(
        state,
        BatchSearchResponse(results=[_to_response(r) for r in results], took_ms=(time.perf_counter() - start) * 1000.0),
    )
