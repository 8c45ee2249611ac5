"""The one search path: a collection's shards (in this process or on Ray actors) -> merged runs -> fusion.

The service encodes the queries and calls `search` once. BM25 runs in two steps, so that every shard
scores with the counts of the whole collection: each shard reports N, total length and the df of the
query terms over its live passages, the counts are summed, and every shard then scores its own segments
with the sums. Dense scores are exact float64 cosines of the stored vectors. Tombstones are applied inside
retrieval (FAISS IDSelector, BM25 mask), so what comes back is live as of the published manifests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from indexing import deadline, stage_clock
from indexing.bm25 import tokenize
from indexing.facets import FacetCount, top_values
from indexing.filters import Node, bind_ids, named_ids
from indexing.manifest import RETRIES, ManifestError, current_version
from indexing.postings import TermStats, okapi_mean_idf
from indexing.ranking import Fused, Ranked, RankRequest, fuse, merge_shards, rank_shard
from indexing.segment import SegmentError
from indexing.shard_view import ShardView

T = TypeVar("T")
KEEP_VIEWS = 2  # the published view and the one before it, while searches on it finish
ShardRef = tuple[str, str]  # (segment directory, a key naming this incarnation of the shard)


class ShardSearcher:
    """One shard's segments, as published manifests: the same code in this process and in a Ray actor."""

    def __init__(self, directory: str) -> None:
        self.dir = Path(directory)
        self._views: dict[int, ShardView] = {}
        self._lock = threading.Lock()

    def view(self, version: int) -> ShardView:
        with self._lock:
            v = self._views.get(version)
            if v is None:
                reuse = [s for old in self._views.values() for s in old.segments]
                last = self._views[max(self._views)] if self._views else None
                block = last.block.data if last is not None and last.block is not None else None
                v = self._views[version] = ShardView.load(self.dir, version, reuse, block)
                for old in sorted(self._views)[:-KEEP_VIEWS]:
                    del self._views[old]
            return v

    def preload(self, version: int) -> None:
        self.view(version)

    def latest(self) -> int | None:
        return current_version(self.dir)

    def term_stats(self, version: int, terms: set[str]) -> TermStats:
        return self.view(version).term_stats(terms)

    def vocabulary_df(self, version: int) -> dict[str, int]:
        return self.view(version).all_df()

    def count(self, version: int, node: Node | None) -> int:
        return self.view(version).count(node)

    def facet(self, version: int, node: Node | None, key: str, kind: str) -> dict[Any, int]:
        return self.view(version).facet(node, key, kind)

    def rank(
        self,
        version: int,
        qv: np.ndarray | None,
        tokens: Sequence[list[str]],
        stats: TermStats | None,
        req: RankRequest,
    ) -> list[dict[str, Ranked]]:
        return rank_shard(self.view(version), qv, tokens, stats, req)


class Fanout(Protocol):
    """Runs a call on every shard: in this process (LocalFanout) or on Ray actors (indexing/ray_shards.py)."""

    def call(self, shards: Sequence[ShardRef], method: str, per_shard: Sequence[dict[str, Any]]) -> list[Any]: ...


class LocalFanout:
    """Every shard searched in this process, one after another."""

    def __init__(self) -> None:
        self._searchers: dict[str, ShardSearcher] = {}
        self._lock = threading.Lock()

    def searcher(self, ref: ShardRef) -> ShardSearcher:
        root, key = ref
        with self._lock:
            if key not in self._searchers:
                self._searchers[key] = ShardSearcher(root)
            return self._searchers[key]

    def call(self, shards: Sequence[ShardRef], method: str, per_shard: Sequence[dict[str, Any]]) -> list[Any]:
        out = []
        for ref, kw in zip(shards, per_shard, strict=True):
            deadline.check()  # between shards: a request past its deadline stops (indexing/deadline.py)
            out.append(getattr(self.searcher(ref), method)(**kw))
        return out

    def forget(self, shards: Sequence[ShardRef]) -> None:
        """Drop the views of deleted shards (their memory goes with them)."""
        with self._lock:
            for _, key in shards:
                self._searchers.pop(key, None)


LOCAL_FANOUT = LocalFanout()  # one per process: shard views are shared by every collection store


class Published(Protocol):
    """What a collection tells the engine: its shards and the manifest versions searched together."""

    def shard_refs(self) -> list[ShardRef]: ...

    def published_versions(self) -> list[int]: ...

    def read_versions(self) -> list[int]: ...

    @property
    def bm25_method(self) -> str: ...

    @property
    def bm25_min_token_chars(self) -> int: ...

    @property
    def bm25_normalize(self) -> str: ...

    def doc_numbers(self, ids: Sequence[str]) -> list[dict[str, int]]:
        """Per shard (in shard_refs order): the document number of each of `ids` that shard holds."""
        ...


def per_shard_filters(coll: Published, node: Node | None) -> list[Node | None]:
    """The filter as each shard evaluates it: a has_id bound to the numbers of that shard's documents (a segment
    knows its rows by document number, not id). The ids are read from the doc stores now, so a document added
    since the searched manifests is not found in them, and one deleted since is no longer matched."""
    ids = named_ids(node)
    if not ids:
        return [node] * len(coll.shard_refs())
    return [bind_ids(node, numbers) for numbers in coll.doc_numbers(sorted(ids))]


_okapi_cache: dict[tuple[Any, ...], float] = {}


def _mean_idf(fanout: Fanout, refs: list[ShardRef], versions: list[int]) -> float:
    """okapi's idf floor needs the mean idf over the whole vocabulary: once per published set."""
    key = (tuple(refs), tuple(versions))
    if key not in _okapi_cache:
        parts = fanout.call(refs, "vocabulary_df", [{"version": v} for v in versions])
        merged: dict[str, int] = {}
        for p in parts:
            for t, c in p.items():
                merged[t] = merged.get(t, 0) + c
        n = sum(s.n_docs for s in fanout.call(refs, "term_stats", [{"version": v, "terms": set()} for v in versions]))
        _okapi_cache.clear()  # one published set at a time is enough
        _okapi_cache[key] = okapi_mean_idf(n, np.fromiter(merged.values(), np.int64, count=len(merged)))
    return _okapi_cache[key]


def search(
    coll: Published,
    fanout: Fanout,
    qv: np.ndarray | None,
    queries: Sequence[str],
    req: RankRequest,
    versions: list[int] | None = None,
) -> list[Fused]:
    """Rank `queries` (qv: their vectors, (nq, d), for dense and hybrid) over every shard; per query the fused
    top k with each unit's ranks and each passage's shard.

    A request may hold versions that writers have since replaced twice and removed (views are kept for the
    last KEEP_VIEWS); it then runs again on the versions published now."""
    return on_versions(coll, lambda v: _search(coll, fanout, qv, queries, req, v), versions)


def on_versions(coll: Published, work: Callable[[list[int]], T], versions: list[int] | None = None) -> T:
    """`work(versions)` on the published versions (or those given); run again on the versions read afresh when a
    commit or merge removed a manifest or segment under it (manifest.KEEP_MANIFESTS), RETRIES times at most."""
    for attempt in range(RETRIES):
        if attempt:
            versions = coll.read_versions()
        try:
            return work(coll.published_versions() if versions is None else versions)
        except (ManifestError, SegmentError, FileNotFoundError):
            if attempt == RETRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))  # a writer between its shard manifest and the set: a moment
    raise AssertionError("unreachable")


def _search(
    coll: Published,
    fanout: Fanout,
    qv: np.ndarray | None,
    queries: Sequence[str],
    req: RankRequest,
    versions: list[int] | None,
) -> list[Fused]:
    refs = coll.shard_refs()
    versions = versions if versions is not None else coll.published_versions()
    tokens = (
        tokenize(list(queries), min_chars=coll.bm25_min_token_chars, normalize=coll.bm25_normalize)
        if req.mode in ("bm25", "hybrid")
        else [[] for _ in queries]
    )
    stats = None
    if req.mode in ("bm25", "hybrid"):
        with stage_clock.stage("bm25"):  # the corpus-wide counts of the query terms: part of BM25's cost
            terms = {t for q in tokens for t in q}
            parts = fanout.call(refs, "term_stats", [{"version": v, "terms": terms} for v in versions])
            mean_idf = _mean_idf(fanout, refs, versions) if coll.bm25_method == "okapi" else 0.0
            stats = TermStats.merge(parts, mean_idf)
    qv = qv if req.mode in ("dense", "hybrid") else None
    reqs = [req if n is req.filter else replace(req, filter=n) for n in per_shard_filters(coll, req.filter)]
    per_shard = fanout.call(
        refs,
        "rank",
        [
            {"version": v, "qv": qv, "tokens": tokens, "stats": stats, "req": r}
            for v, r in zip(versions, reqs, strict=True)
        ],
    )
    out = []
    with stage_clock.stage("fuse"):  # the shards' runs merged, then the runs fused
        for qi in range(len(queries)):
            merged, shard_of = merge_shards([runs[qi] for runs in per_shard], req.n)
            top, ranks = fuse(merged, req)
            out.append(Fused(top, ranks, shard_of))
    return out


def _on_shards(coll: Published, fanout: Fanout, method: str, node: Node | None, kw: dict[str, Any]) -> list[Any]:
    """One call per shard on the published manifests (read again if a merge removed a segment under them), each
    with the filter as that shard evaluates it."""

    def call(versions: list[int]) -> list[Any]:
        nodes = per_shard_filters(coll, node)
        per_shard = [{"version": v, "node": n, **kw} for v, n in zip(versions, nodes, strict=True)]
        return fanout.call(coll.shard_refs(), method, per_shard)

    return on_versions(coll, call)


def count(coll: Published, fanout: Fanout, node: Node | None) -> int:
    """Documents of the published index with a live passage that passes the filter (each document lives in
    one shard, so the shards' counts add up)."""
    return sum(_on_shards(coll, fanout, "count", node, {}))


def facet(
    coll: Published, fanout: Fanout, node: Node | None, key: str, kind: str, limit: int
) -> tuple[list[FacetCount], int]:
    """The `limit` values of a declared field held by the most documents of the published index that pass the
    filter, with their counts, and the number of distinct values (indexing/facets.py)."""
    return top_values(_on_shards(coll, fanout, "facet", node, {"key": key, "kind": kind}), limit)
