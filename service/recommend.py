"""Recommend: documents like some stored documents (and unlike others), found with their stored vectors.

No text is encoded: each named document's vector is the mean of its passages' stored vectors (as written
when it was indexed) scaled to unit length, the query vector is Qdrant's "average vector" strategy over those,
mean(like) + (mean(like) - mean(unlike)) at unit length, and the engine's dense search runs with it, as a search
would (filters, thresholds, pages).
The named documents themselves are never among the hits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from indexing.collection import Collection
from indexing.engine import Fanout
from indexing.engine import search as engine_search
from indexing.filters import Node
from indexing.ranking import RankRequest
from service import timing
from service.grouping import GroupSpec, grouped
from service.search import DELETED_SLACK, SearchResult, assemble_results


class DocumentsNotFound(KeyError):
    """Named documents that the collection does not hold."""

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__(list(missing))
        self.missing = list(missing)


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def query_vector(coll: Collection, like: Sequence[str], unlike: Sequence[str]) -> np.ndarray:
    """(d,) float32, unit length, from the stored passage vectors of the named documents."""
    like, unlike = list(dict.fromkeys(like)), list(dict.fromkeys(unlike))  # a document counts once, however named
    stored: dict[str, np.ndarray] = {}  # the vectors alone: a document's text is not read
    for store, ids in coll.by_store([*like, *unlike]):
        stored.update(store.passage_vectors(ids))
    missing = list(dict.fromkeys(d for d in [*like, *unlike] if d not in stored))
    if missing:
        raise DocumentsNotFound(missing)

    def mean_of(ids: Sequence[str]) -> np.ndarray:  # each document weighs the same, whatever its passages
        return np.mean([_unit(stored[d].astype(np.float64).mean(axis=0)) for d in ids], axis=0)

    pos = mean_of(like)
    q = pos + (pos - mean_of(unlike)) if unlike else pos
    return _unit(q).astype(np.float32)


def recommend(
    *,
    collection: Collection,
    fanout: Fanout,
    like: Sequence[str],
    unlike: Sequence[str] = (),
    k: int = 10,
    offset: int = 0,
    filter: Node | None = None,
    score_threshold: float | None = None,
    group_by: GroupSpec | None = None,
) -> SearchResult:
    """The documents nearest the query vector of `like`/`unlike` (by their best passage), leaving out the named
    ones; DocumentsNotFound names the documents the collection does not hold."""
    timing.since(timing.HANDED, "thread")  # the handler's hand-off to this thread
    t0 = time.perf_counter()
    versions = collection.published_versions()
    with timing.stage("vectors"):
        qv = query_vector(collection, like, unlike)[None, :]  # (1, d)
    named = set(like) | set(unlike)
    drawn = group_by.depth_for(k + offset) if group_by is not None else k + offset  # the groups' documents
    want = drawn + len(named)  # the named documents are dropped after ranking
    req = RankRequest(mode="dense", k=want + DELETED_SLACK, filter=filter, score_threshold=score_threshold)
    with timing.stage("engine"):
        fused = engine_search(collection, fanout, qv, [""], req, versions=versions)
    with timing.stage("hydrate"):
        passages = collection.passages({pid: f.shard_of[pid] for f in fused for _, _, pid in f.top})
    took_ms = (time.perf_counter() - t0) * 1000.0
    (result,) = assemble_results(
        queries=[""], results=fused, passage_of=passages.get, took_ms=took_ms, k_out=want + DELETED_SLACK, rerank=None
    )
    hits = [h for h in result.hits if h.id not in named]
    hits = grouped(hits, group_by, offset + k) if group_by is not None else hits
    return SearchResult(hits=hits[offset : offset + k], took_ms=took_ms)
