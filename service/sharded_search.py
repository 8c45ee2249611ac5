"""Search over a sharded collection: fan the query out to every shard, merge, fuse, hydrate.

Why the merge is exact: a document lives in exactly one shard, and each shard returns its own top n units
(documents, or passages) per run, so the global top n of a run is the top n of the shards' lists merged
by (score, passage id). Dense scores are bit-identical because the fetched rows are rescored in float64
(indexing/dense.py `exact_scores`; the rows themselves are exact for flat indexes, and HNSW shards are
approximate as an unsharded HNSW is); BM25 scores are bit-identical because every shard was indexed with
the corpus-wide statistics (indexing/bm25_global.py); passage ids are the same (indexing/shards.py), so
ties order alike; and RRF then runs on the merged lists exactly as on one node's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from indexing.docstore import PassageHit
from indexing.shards import ShardedCollection
from service.batching import QueryEncoder
from service.search import Dim, Mode, Ranked, RerankStep, SearchResult, _fuse, assemble_results
from service.shard_search import ShardRanking, ShardRef


class ShardFanout(Protocol):
    """Runs a call on every shard: in this process (LocalFanout) or on Ray actors (RayFanout)."""

    def rank(self, *, shards: Sequence[ShardRef], versions: Sequence[int], **request: Any) -> list[ShardRanking]: ...

    def hydrate(
        self, *, shards: Sequence[ShardRef], wanted: Sequence[Sequence[int]]
    ) -> list[dict[int, PassageHit]]: ...


def shard_refs(collection: ShardedCollection) -> list[ShardRef]:
    return [(str(s.root), f"{s.root}#{collection.settings.created_at}") for s in collection.shards]


def merge_runs(per_shard: Sequence[dict[str, Ranked]], n: int) -> dict[str, Ranked]:
    """One query: each run's lists from every shard merged by (score, passage id), as one index orders
    them (service/search.py `_group`), top n. Local unit keys repeat across shards: they become (shard, key);
    passage ids are unique across a collection's shards (indexing/shards.py numbers them)."""
    merged: dict[str, Ranked] = {}
    for name in per_shard[0] if per_shard else ():
        units = [((s, key), score, pid) for s, runs in enumerate(per_shard) for key, score, pid in runs[name]]
        units.sort(key=lambda u: (-u[1], u[2]))
        merged[name] = units[:n]
    return merged


def sharded_search_batch(
    *,
    collection: ShardedCollection,
    fanout: ShardFanout,
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
) -> list[SearchResult]:
    """search_batch's contract over the shards of a collection."""
    t0 = time.perf_counter()
    pointer = collection.pointer()
    refs = shard_refs(collection)
    k_out, k = k, max(k, rerank.top_n) if rerank is not None else k
    n = max(k, depth) if mode == "hybrid" else k
    qv = None
    if mode in ("dense", "hybrid"):
        if embedder is None:
            raise ValueError("dense search needs the collection's embedder")
        qv = embedder.encode_queries(list(queries))  # (nq, d)
    rankings = fanout.rank(
        shards=refs,
        versions=pointer["versions"],
        queries=list(queries),
        qv=qv,
        mode=mode,
        n=n,
        dim=dim,
        rescore=rescore,
        group_by_doc=group_by_doc,
        hydrate=k,
    )
    results = [
        _fuse(merge_runs([r.runs[qi] for r in rankings], n), mode, k, rrf_k, depth, weights)
        for qi in range(len(queries))
    ]
    # Hydrate the final hits: most came with the rankings; the rest (a fused hit deep in one list) in a
    # second round, from the shards that hold them.
    missing: list[set[int]] = [set() for _ in refs]
    home = {pid: s for s, r in enumerate(rankings) for runs in r.runs for run in runs.values() for _, _, pid in run}
    for top, _ in results:
        for _, _, pid in top:
            if pid not in rankings[home[pid]].passages:
                missing[home[pid]].add(pid)
    extra = fanout.hydrate(shards=refs, wanted=[sorted(m) for m in missing]) if any(missing) else [{} for _ in refs]
    passages = [{**r.passages, **e} for r, e in zip(rankings, extra, strict=True)]
    took_ms = (time.perf_counter() - t0) * 1000.0
    return assemble_results(
        queries=queries,
        results=results,
        passage_of=lambda pid: passages[home[pid]].get(pid),
        took_ms=took_ms,
        k_out=k_out,
        rerank=rerank,
    )
