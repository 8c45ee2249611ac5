"""The search path: encode the queries, call the engine once, hydrate the hits, rerank, respond.

The engine (indexing/engine.py) owns everything about shards, segments, deletions and fusion; this module
only turns its ranked passage ids into hits a person can read."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from indexing import stage_clock
from indexing.bm25 import term_spans, tokenize
from indexing.collection import Collection
from indexing.engine import LOCAL_FANOUT, Fanout
from indexing.engine import search as engine_search
from indexing.filters import Node
from indexing.fusion import fusion_in_force
from indexing.metadata_paths import project
from indexing.ranking import RUNS, Dim, Fused, Mode, RankRequest
from service import timing
from service.batching import MicroBatcher, QueryEncoder
from service.grouping import GroupSpec, grouped

DELETED_SLACK = 8


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    title: str
    text: str
    metadata: dict[str, Any]
    passage_id: int
    passage_index: int
    start: int
    end: int
    ranks: dict[str, int | None] = field(default_factory=dict)
    rerank_score: float | None = None  # the cross-encoder's score, when the rerank stage scored this hit
    highlights: list[tuple[int, int]] | None = None  # spans of `text` that match a query term, when asked for


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    took_ms: float
    rerank: Any = None  # what the rerank step reported (service.rerank.RerankOutcome), when one ran


class RerankStep(Protocol):
    """Rescores one query's fused hits (service.rerank.Reranking); returns the hits in their new order."""

    @property
    def top_n(self) -> int: ...

    def __call__(self, query: str, hits: list[Hit]) -> tuple[list[Hit], Any]: ...


def search_batch(
    *,
    collection: Collection,
    embedder: QueryEncoder | None,
    queries: Sequence[str],
    k: int = 10,
    mode: Mode = "hybrid",
    dim: Dim = "full",
    rrf_k: int = 60,
    depth: int = 200,
    weights: Mapping[str, float] | None = None,
    group_by_doc: bool = True,
    rescore: bool = True,
    rerank: RerankStep | None = None,
    fanout: Fanout | None = None,
    filter: Node | None = None,
    offset: int = 0,
    fusion: Mapping[str, Any] | None = None,
    score_threshold: float | None = None,
    highlight: bool = False,
    group_by: GroupSpec | None = None,
) -> list[SearchResult]:
    """Search many queries at once (one encoder batch, one engine call); with `rerank`, the top
    `rerank.top_n` fused hits of each query are rescored before the k best are returned. `filter` (parsed,
    indexing/filters.py) is applied inside retrieval; `offset` skips that many hits of the final list (the
    fused, reranked one): pages of one published index do not overlap or skip. `fusion` (hybrid; a request's
    {"method", "alpha", "normalization"}): None or method "auto" is the collection's stored choice.
    `score_threshold`: hits whose (fused) score is below it are left out, before the rerank stage. `highlight`:
    each hit of the page says which words of its text match a query term, as BM25 matches them. `group_by`: at
    most `size` hits per value of a metadata field, drawn from the best `depth` documents (service/grouping.py)."""
    timing.since(timing.HANDED, "thread")  # a handler's hand-off to this thread (none when called directly)
    t0 = time.perf_counter()
    fanout = fanout if fanout is not None else LOCAL_FANOUT
    k_out, k = k, k + offset
    k = max(k, rerank.top_n) if rerank is not None else k  # fuse enough for the reranker
    k = max(k, group_by.depth_for(k_out + offset)) if group_by is not None else k  # the documents groups come from
    # A document deleted after the last commit still ranks until the job's commit (a moment later) and is
    # dropped at hydration; a few spare hits keep k full meanwhile.
    k += DELETED_SLACK
    versions = collection.published_versions()  # one published state for the encoding and the ranking
    qv = None
    if mode in ("dense", "hybrid"):
        if embedder is None:
            raise ValueError("dense search needs the collection's embedder")
        # A contextual embedder encodes with the context the published vectors were made with.
        t_enc = time.perf_counter()
        qv = embedder.encode_queries(list(queries), context=collection.query_context(fanout))  # (nq, d)
        if not isinstance(embedder, MicroBatcher):  # the batcher records queue and encode itself
            timing.record("encode", time.perf_counter() - t_enc)
    req = RankRequest(
        mode=mode,
        k=k,
        dim=dim,
        rrf_k=rrf_k,
        depth=depth,
        weights=weights,
        group_by_doc=group_by_doc,
        rescore=rescore,
        filter=filter,
        fusion=fusion_in_force(fusion, collection.settings.fusion, weights_given=weights is not None),
        score_threshold=score_threshold,
    )
    with timing.stage("engine"), stage_clock.collect() as engine_stages:
        fused = engine_search(collection, fanout, qv, queries, req, versions=versions)
    for name, seconds in engine_stages.items():  # dense, bm25, fuse: parts of `engine`
        timing.record(name, seconds)
    wanted = {pid: f.shard_of[pid] for f in fused for _, _, pid in f.top}
    with timing.stage("hydrate"):
        passages = collection.passages(wanted)
    took_ms = (time.perf_counter() - t0) * 1000.0
    results = assemble_results(
        queries=queries,
        results=fused,
        passage_of=passages.get,
        took_ms=took_ms,
        k_out=k_out,
        rerank=rerank,
        offset=offset,
        group_by=group_by,
    )
    if not highlight:
        return results
    return with_highlights(results, queries, collection.bm25_min_token_chars, collection.bm25_normalize)


def with_highlights(
    results: list[SearchResult], queries: Sequence[str], min_chars: int = 2, normalize: str = "none"
) -> list[SearchResult]:
    """Each page's hits with the spans of their text that match a term of their query (indexing/bm25.py)."""
    with timing.stage("highlight"):
        out = []
        for r, terms in zip(results, tokenize(queries, min_chars=min_chars, normalize=normalize), strict=True):
            wanted = frozenset(terms)
            hits = [replace(h, highlights=term_spans(h.text, wanted, min_chars, normalize)) for h in r.hits]
            out.append(replace(r, hits=hits))
    return out


def assemble_results(
    *,
    queries: Sequence[str],
    results: Sequence[Fused],
    passage_of: Callable[[int], Any],
    took_ms: float,
    k_out: int,
    rerank: RerankStep | None,
    offset: int = 0,
    group_by: GroupSpec | None = None,
) -> list[SearchResult]:
    """Fused (unit, score, passage id) lists -> hydrated hits, reranked when asked, cut to k_out.
    `passage_of` finds a passage (None: deleted since the published manifest)."""
    out = []
    for query, fused in zip(queries, results, strict=True):
        top, ranks = fused.top, fused.ranks
        hits = []
        for key, score, pid in top:
            p = passage_of(pid)
            if p is None:  # deleted between ranking and hydration
                continue
            hits.append(
                Hit(
                    id=p.doc_id,
                    score=score,
                    title=p.title,
                    text=p.text,
                    metadata=p.metadata,
                    passage_id=p.pid,
                    passage_index=p.index,
                    start=p.start,
                    end=p.end,
                    ranks={name: ranks[name].get(key) if name in ranks else None for name in RUNS},
                )
            )
        if rerank is None:
            hits = grouped(hits, group_by, offset + k_out) if group_by is not None else hits
            out.append(SearchResult(hits=hits[offset : offset + k_out], took_ms=took_ms))
            continue
        with timing.stage("rerank"):
            hits, outcome = rerank(query, hits)  # after fusion and hydration: the reranker reads passage texts
        hits = grouped(hits, group_by, offset + k_out) if group_by is not None else hits  # groups of the reranked order
        page = hits[offset : offset + k_out]
        out.append(SearchResult(hits=page, took_ms=took_ms + outcome.took_ms, rerank=outcome))
    timing.mark("searched")  # what follows, up to the response start, is the `serialize` stage
    return out


def projected(
    results: list[SearchResult], *, with_text: bool, with_metadata: bool | Sequence[str]
) -> list[SearchResult]:
    """The results with each hit's text left out (empty) unless `with_text`, and its metadata whole (True), left
    out (False: empty) or cut to the keys named: done after the rerank stage and the highlights, which read the
    text, so that only the answer is smaller."""
    if with_text and with_metadata is True:
        return results
    keys = None if isinstance(with_metadata, bool) else tuple(with_metadata)
    cut: dict[int, dict[str, Any]] = {}  # by id() of a metadata object: hits of one document share it

    def metadata(md: dict[str, Any]) -> dict[str, Any]:
        if with_metadata is True:
            return md
        if keys is None:
            return {}
        out = cut.get(id(md))
        if out is None:
            out = cut[id(md)] = project(md, keys)
        return out

    return [
        replace(
            r,
            hits=[replace(h, text=h.text if with_text else "", metadata=metadata(h.metadata)) for h in r.hits],
        )
        for r in results
    ]
