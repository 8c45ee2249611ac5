from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from indexing.collection import CollectionNotFound
from indexing.metadata_paths import path_key
from indexing.store import READ_FAULTS
from service import timing
from service.access import RequestAccess, read_filter, require, unreadable_ids
from service.access_tokens import Access
from service.api.json_body import JsonRoute
from service.deps import State
from service.errors import ApiError, shown
from service.grouping import GroupSpec
from service.limits import check_response_size, check_search_work
from service.model_registry import (
    ModelKindMismatch,
    UnknownModelName,
    UnusableModel,
    model_unavailable,
    public_model_name,
    request_model,
)
from service.recommend import DocumentsNotFound, recommend
from service.rerank import NoReranker, Reranking, UnknownReranker, prepare_rerank
from service.response_size import estimated_size
from service.schemas import ErrorResponse
from service.search import Hit, SearchResult, projected, search_batch
from service.search_requests import BatchSearchRequest, RecommendRequest, SearchOptions, SearchRequest
from service.search_schemas import (
    BatchSearchResponse,
    HitOut,
    PassageRef,
    Ranks,
    RerankInfo,
    SearchResponse,
    response_metadata,
)
from service.state import AppState

router = APIRouter(prefix="/search", tags=["search"], route_class=JsonRoute)
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse},
    413: {"model": ErrorResponse, "description": "the request asks for more work or a larger response than allowed"},
    422: {"model": ErrorResponse},
}


def _bounded(state: AppState, response: SearchResponse | BatchSearchResponse) -> Response:
    """The serialised response, refused (413) past VELA_MAX_RESPONSE_BYTES instead of being sent. A backstop:
    _check_estimate has refused, before any was built, a response whose estimate passes the limit."""
    body = response.__pydantic_serializer__.to_json(response)  # model_dump_json's bytes, without a str copy first
    check_response_size(state.settings, len(body))
    return Response(body, media_type="application/json")


async def _respond(build: Callable[[], SearchResponse | BatchSearchResponse], state: AppState) -> Response:
    """The body, estimated, built and serialised on a worker thread: tens of megabytes of hits take seconds of CPU,
    during which the event loop must go on answering other requests (a health check, a small search)."""

    def respond() -> Response:
        return _bounded(state, build())

    return await run_in_threadpool(respond)


def _check_estimate(state: AppState, results: Sequence[SearchResult], *, batch: bool) -> None:
    """413 before the response is built when its estimate already passes VELA_MAX_RESPONSE_BYTES: building and
    serialising a body many times the limit costs more memory and time than the search did."""
    check_response_size(state.settings, estimated_size(results, batch=batch))


def _hit_out(h: Hit, metadata: dict[str, Any]) -> HitOut:
    out = HitOut(
        id=h.id,
        score=h.score,
        title=h.title,
        text=h.text,
        metadata={},
        passage=PassageRef(id=h.passage_id, index=h.passage_index, start=h.start, end=h.end),
        ranks=Ranks(dense=h.ranks.get("dense"), bm25=h.ranks.get("bm25")),
        rerank_score=h.rerank_score,
        highlights=h.highlights,
    )
    out.metadata = metadata  # already made safe (response_metadata): assigned as it is, shared, not copied
    return out


def _to_response(result: SearchResult, cleaned: dict[int, dict[str, Any]] | None = None) -> SearchResponse:
    """`cleaned`: metadata made safe to serialise, by id() of the hits' metadata objects (a batch shares one).
    Each metadata object is cleaned once, and its hits share the result: hits of one passage share one object
    across queries, and copying it per hit (as validating it in every HitOut would) costs many times the body."""
    cleaned = {} if cleaned is None else cleaned

    def safe(metadata: Any) -> dict[str, Any]:
        out = cleaned.get(id(metadata))
        if out is None:
            out = cleaned[id(metadata)] = response_metadata(metadata)
        return out

    return SearchResponse(
        hits=[_hit_out(h, safe(h.metadata)) for h in result.hits],
        took_ms=result.took_ms,
        rerank=RerankInfo(**dataclasses.asdict(result.rerank)) if result.rerank is not None else None,
    )


def _searched(state: AppState, name: str, **kw: Any) -> list[SearchResult]:
    """search_batch; a collection deleted while it was searched (its files went from under the search) is a 404,
    as it would have been a moment later, not a 500."""
    try:
        return search_batch(**kw)
    except READ_FAULTS as exc:
        if state.collections.exists(name) and kw["collection"].root.is_dir():
            raise
        raise ApiError(404, "collection_not_found", f"no collection named {shown(name)}") from exc


def _group_spec(opts: SearchOptions | RecommendRequest, schema: dict[str, Any]) -> GroupSpec | None:
    """The request's group_by; a field a strict schema does not declare is a 422, as in a filter."""
    g = opts.group_by
    if g is None:
        return None
    key = path_key(g.key)
    if not key or (schema.get("strict") and key not in schema.get("fields", {})):
        raise ApiError(422, "invalid_request", f"group_by.key: unknown field {shown(g.key)}")
    return GroupSpec(key=key, size=g.size, depth=g.depth)


def _ranked(opts: SearchOptions) -> int:
    """Documents ranked per query: the page (offset + k), or the documents groups are drawn from."""
    end = opts.k + opts.offset
    if opts.group_by is None:
        return end
    return GroupSpec(key=opts.group_by.key, size=opts.group_by.size, depth=opts.group_by.depth).depth_for(end)


async def _run(state: AppState, opts: SearchOptions, queries: list[str], access: Access) -> list[SearchResult]:
    require(access, opts.collection)  # before the lookup: a token learns nothing of collections it does not reach
    try:
        coll = state.collections.get(opts.collection)
    except CollectionNotFound as exc:
        raise ApiError(404, "collection_not_found", f"no collection named {shown(opts.collection)}") from exc
    node = read_filter(access, opts.collection, opts.filter, coll.settings.schema)
    group_by = _group_spec(opts, coll.settings.schema)
    try:
        embedder = state.query_encoders.get(coll.settings.embedder) if opts.mode != "bm25" else None
    except (OSError, ValueError) as exc:  # its folder was removed (`vela models remove --force`) or damaged
        what = "bm25 searches still work"
        err = model_unavailable(settings=state.settings, stored=coll.settings.embedder, exc=exc, what=what)
        raise ApiError(409, "model_unavailable", str(err)) from exc
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
                # A request's registry name, else the server default's name (registered or `unregistered`), never a
                # folder on the server.
                label=opts.rerank.model
                or public_model_name(settings=state.settings, stored=state.settings.reranker or ""),
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
    timing.mark(timing.HANDED)  # search_batch records the wait for a thread (and the GIL) from here: `thread`
    # Encoding and index scans are CPU work: keep them off the event loop.
    search = partial(_searched, state, opts.collection, collection=coll, fanout=state.collections.fanout)
    results = await run_in_threadpool(
        search,
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
        score_threshold=opts.score_threshold,
        highlight=opts.highlight,
        group_by=group_by,
    )
    results = projected(results, with_text=opts.with_text, with_metadata=opts.with_metadata)
    for r in results:
        if r.rerank is not None:
            state.metrics.observe_rerank(status=r.rerank.status, pairs=r.rerank.scored, seconds=r.rerank.took_ms / 1000)
    seconds = time.perf_counter() - start
    state.metrics.observe_search(mode=opts.mode, dim=opts.dim, queries=len(queries), seconds=seconds)
    return results


@router.post("", response_model=SearchResponse, responses=ERRORS)
async def search(body: SearchRequest, state: State, access: RequestAccess) -> Response:
    """Dense, BM25 or hybrid search over one collection. Hybrid fuses the two lists as the collection's stored
    choice says (RRF until one is chosen; GET /collections/{name} shows it), or as the request's `fusion` says."""
    depth = body.depth if body.mode == "hybrid" else 1  # only hybrid reads lists to a depth
    check_search_work(
        state.settings,
        queries=[body.query],
        k=body.k + body.offset,
        depth=depth,
        highlight=body.highlight,
        ranked=_ranked(body),
    )
    (result,) = await _run(state, body, [body.query], access)

    def build() -> SearchResponse:
        _check_estimate(state, [result], batch=False)
        return _to_response(result)

    return await _respond(build, state)


@router.post("/batch", response_model=BatchSearchResponse, responses=ERRORS)
async def search_many(body: BatchSearchRequest, state: State, access: RequestAccess) -> Response:
    """Many queries with the same options, in one encoder batch. The work of one request is bounded: queries,
    k x queries (fewer with highlight), depth x queries and query characters (413 names the limit)."""
    depth = body.depth if body.mode == "hybrid" else 1  # only hybrid reads lists to a depth
    check_search_work(
        state.settings,
        queries=body.queries,
        k=body.k + body.offset,
        depth=depth,
        highlight=body.highlight,
        ranked=_ranked(body),
    )
    start = time.perf_counter()
    results = await _run(state, body, body.queries, access)

    def build() -> BatchSearchResponse:
        _check_estimate(state, results, batch=True)
        cleaned: dict[int, dict[str, Any]] = {}  # id() of a hit's metadata -> it, safe: objects in `results` meanwhile
        responses = [_to_response(r, cleaned) for r in results]
        return BatchSearchResponse(results=responses, took_ms=(time.perf_counter() - start) * 1000.0)

    return await _respond(build, state)


recommend_router = APIRouter(prefix="/recommend", tags=["search"], route_class=JsonRoute)


@recommend_router.post("", response_model=SearchResponse, responses=ERRORS)
async def recommend_documents(body: RecommendRequest, state: State, access: RequestAccess) -> Response:
    """Documents like the stored documents `like` (and unlike `unlike`), found with their stored vectors: no text
    is encoded. The named documents are never among the hits; 404 document_not_found names any not stored."""
    named = len(body.like) + len(body.unlike)
    end = body.k + body.offset
    drawn = body.group_by.depth if body.group_by is not None and body.group_by.depth is not None else end
    check_search_work(state.settings, queries=[""], k=end + named, depth=1, ranked=drawn + named)
    require(access, body.collection)
    try:
        coll = state.collections.get(body.collection)
    except CollectionNotFound as exc:
        raise ApiError(404, "collection_not_found", f"no collection named {shown(body.collection)}") from exc
    node = read_filter(access, body.collection, body.filter, coll.settings.schema)
    hidden = await run_in_threadpool(unreadable_ids, access, body.collection, coll, [*body.like, *body.unlike])
    if hidden:  # outside the token's filter or not stored, alike: the token learns nothing of the others
        missing = ", ".join(shown(d) for d in hidden[:5])
        raise ApiError(404, "document_not_found", f"collection {shown(body.collection)} holds no {missing}")
    run = partial(recommend, collection=coll, fanout=state.collections.fanout)
    timing.mark(timing.HANDED)  # recommend records the wait for a thread (and the GIL) from here: `thread`
    try:
        result = await run_in_threadpool(
            run,
            like=body.like,
            unlike=body.unlike,
            k=body.k,
            offset=body.offset,
            filter=node,
            score_threshold=body.score_threshold,
            group_by=_group_spec(body, coll.settings.schema),
        )
    except DocumentsNotFound as exc:
        missing = ", ".join(shown(d) for d in exc.missing[:5])
        raise ApiError(404, "document_not_found", f"collection {shown(body.collection)} holds no {missing}") from exc
    (result,) = projected([result], with_text=body.with_text, with_metadata=body.with_metadata)

    def build() -> SearchResponse:
        _check_estimate(state, [result], batch=False)
        return _to_response(result)

    return await _respond(build, state)
