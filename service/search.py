"""The search path: encode the query, search FAISS and BM25, fuse, and hydrate hits from the doc store."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from indexing.collection import Collection
from indexing.snapshot import IndexSnapshot
from service.batching import QueryEncoder
from service.fusion import reciprocal_rank_fusion

Mode = Literal["dense", "bm25", "hybrid"]
Dim = Literal["full", "256"]
RESCORE_FACTOR = 4  # dim=256: the prefix index shortlists 4x the passages needed, full dims rank them
RUNS: tuple[str, ...] = ("dense", "bm25")
TIE_WIDEN = 16  # at most this many times the first fetch, to see every passage tied at the cut
Ranked = list[tuple[Any, float, int]]  # (unit key, score, representative passage id), best first


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


PassageDocs = Callable[[np.ndarray], Mapping[int, Any]]  # passage ids -> {pid: document key}, existing only


class _DocNumbers:
    """Passage -> document in memory, loaded once per published snapshot: grouping a hybrid query's
    hundreds of passages by document then costs a binary search instead of SQLite round trips."""

    def __init__(self, pids: np.ndarray, docs: np.ndarray) -> None:
        self.pids = pids  # (P,) ascending
        self.docs = docs  # (P,)

    def __call__(self, pids: np.ndarray) -> dict[int, int]:
        pids = np.asarray(pids, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.pids, pids), max(len(self.pids) - 1, 0))  # (n,)
        found = self.pids[pos] == pids if len(self.pids) else np.zeros(len(pids), bool)
        return dict(zip(pids[found].tolist(), self.docs[pos[found]].tolist(), strict=True))


# id(snapshot) -> (a weak reference to it, its table): the table lives as long as the snapshot is in use.
_doc_numbers: dict[int, tuple[weakref.ref[IndexSnapshot], _DocNumbers]] = {}
_doc_numbers_lock = threading.Lock()


def _fast_passage_docs(coll: Collection, snap: IndexSnapshot) -> PassageDocs:
    with _doc_numbers_lock:
        entry = _doc_numbers.get(id(snap))
        if entry is not None and entry[0]() is snap:
            return entry[1]
        for key in [key for key, (ref, _) in _doc_numbers.items() if ref() is None]:
            del _doc_numbers[key]  # snapshots replaced by newer versions
        table = _DocNumbers(*coll.docstore.passage_doc_numbers())
        _doc_numbers[id(snap)] = (weakref.ref(snap), table)
        return table


def _group(
    lists: Sequence[tuple[np.ndarray, np.ndarray]], pid_docs: Mapping[int, str], group_by_doc: bool, n: int
) -> list[Ranked]:
    """Per query: units (documents, or passages) best first, at most n. A document scores as its best
    passage; passages deleted since the snapshot was published are dropped. Equal scores are ordered by
    passage id: the indexes return ties in no set order, and a sharded collection, whose passage ids are
    the same, merges its shards' lists by (score, passage id) to give the very same order."""
    out: list[Ranked] = []
    for pids, scores in lists:
        seen: set[Any] = set()
        ranked: Ranked = []
        order = np.lexsort((pids, -scores))  # (m,) by score descending, then passage id
        for pid, score in zip(pids[order].tolist(), scores[order].tolist(), strict=True):
            doc = pid_docs.get(pid)
            if doc is None:
                continue
            key = doc if group_by_doc else pid
            if key in seen:
                continue
            seen.add(key)
            ranked.append((key, float(score), pid))
            if len(ranked) == n:
                break
        out.append(ranked)
    return out


def _ranked_units(
    passage_docs: PassageDocs,
    search: Callable[[int], list[tuple[np.ndarray, np.ndarray]]],
    total: int,
    n: int,
    group_by_doc: bool,
) -> list[Ranked]:
    """Fetch enough passages that n distinct units come out, widening the fetch when documents repeat, and
    when the last unit kept ties the last passage fetched (up to TIE_WIDEN times the first fetch): which of
    tied passages an index returns at its cut is arbitrary, and the ones left out may come first by id."""
    first = fetch = min(total, n * 3 if group_by_doc else n)
    while True:
        lists = search(fetch)
        all_pids = np.unique(np.concatenate([p for p, _ in lists])) if lists else np.empty(0, np.int64)
        pid_docs = passage_docs(all_pids)
        ranked = _group(lists, pid_docs, group_by_doc, n)
        full = [len(p) == fetch for p, _ in lists]
        short = any(len(r) < n and f for r, f in zip(ranked, full, strict=True))
        tied = fetch < first * TIE_WIDEN and any(
            f and len(r) == n and float(s.min()) >= r[-1][1] for r, f, (_, s) in zip(ranked, full, lists, strict=True)
        )
        if not (short or tied) or fetch >= total:
            return ranked
        fetch = min(total, fetch * 4)


def _fuse(
    per_run: dict[str, Ranked],
    mode: Mode,
    k: int,
    rrf_k: int,
    depth: int,
    weights: Mapping[str, float] | None,
) -> tuple[Ranked, dict[str, dict[Any, int]]]:
    """One query's top k, and each unit's rank in each run."""
    ranks = {name: {key: i + 1 for i, (key, _, _) in enumerate(r)} for name, r in per_run.items()}
    if mode != "hybrid":
        return per_run[mode][:k], ranks
    rep = {}  # the passage shown for a fused unit: its best dense passage, else its best BM25 one
    for name in ("bm25", "dense"):
        rep.update({key: pid for key, _, pid in per_run[name]})
    fused = reciprocal_rank_fusion(
        {name: [key for key, _, _ in r] for name, r in per_run.items()}, k=rrf_k, depth=depth, weights=weights
    )
    return [(key, score, rep[key]) for key, score in fused[:k]], ranks


def rank_runs(
    *,
    snap: IndexSnapshot,
    passage_docs: PassageDocs,
    qv: np.ndarray | None,
    queries: Sequence[str],
    mode: Mode,
    n: int,
    dim: Dim,
    rescore: bool,
    group_by_doc: bool,
) -> dict[str, list[Ranked]]:
    """Each run's top n units per query, before fusion: what one index (or one shard's) contributes."""
    runs: dict[str, list[Ranked]] = {}
    if qv is not None:
        index_dim = "full" if dim == "full" else "small"
        factor = RESCORE_FACTOR if rescore else 0
        runs["dense"] = _ranked_units(
            passage_docs,
            lambda f: snap.search_dense(qv, f, dim=index_dim, rescore_factor=factor),
            snap.passages,
            n,
            group_by_doc,
        )
    if mode in ("bm25", "hybrid"):
        texts = list(queries)
        search = lambda f: snap.search_bm25(texts, f)  # noqa: E731
        runs["bm25"] = _ranked_units(passage_docs, search, snap.passages, n, group_by_doc)
    return runs


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
) -> list[SearchResult]:
    """Search many queries at once (one encoder batch, one FAISS call, one BM25 call); with `rerank`, the
    top `rerank.top_n` fused hits of each query are rescored before the k best are returned."""
    t0 = time.perf_counter()
    snap = collection.snapshot()
    k_out, k = k, max(k, rerank.top_n) if rerank is not None else k  # fuse enough for the reranker
    n = max(k, depth) if mode == "hybrid" else k
    qv = None
    if mode in ("dense", "hybrid"):
        if embedder is None:
            raise ValueError("dense search needs the collection's embedder")
        # A contextual embedder encodes with the context the snapshot's vectors were made with.
        qv = embedder.encode_queries(list(queries), context=snap.context)  # (nq, d)

    def rank(passage_docs: PassageDocs) -> list[tuple[Ranked, dict[str, dict[Any, int]]]]:
        runs = rank_runs(
            snap=snap,
            passage_docs=passage_docs,
            qv=qv,
            queries=queries,
            mode=mode,
            n=n,
            dim=dim,
            rescore=rescore,
            group_by_doc=group_by_doc,
        )
        return [
            _fuse({name: r[qi] for name, r in runs.items()}, mode, k, rrf_k, depth, weights)
            for qi in range(len(queries))
        ]

    # Fast: passages grouped by an in-memory table of the snapshot. A document deleted or replaced since
    # the snapshot was published can still rank there; hydration finds it gone, and only then the exact
    # path runs, with every passage checked against the doc store.
    results = rank(_fast_passage_docs(collection, snap))
    pids = [pid for top, _ in results for _, _, pid in top]
    passages = collection.docstore.passages(pids)
    if len(passages) < len(set(pids)):
        results = rank(lambda pids: collection.docstore.passage_docs(pids.tolist()))
        pids = [pid for top, _ in results for _, _, pid in top]
        passages = collection.docstore.passages(pids)
    took_ms = (time.perf_counter() - t0) * 1000.0
    return assemble_results(
        queries=queries, results=results, passage_of=passages.get, took_ms=took_ms, k_out=k_out, rerank=rerank
    )


def assemble_results(
    *,
    queries: Sequence[str],
    results: Sequence[tuple[Ranked, Mapping[str, Mapping[Any, int]]]],
    passage_of: Callable[[int], Any],
    took_ms: float,
    k_out: int,
    rerank: RerankStep | None,
) -> list[SearchResult]:
    """Fused (unit, score, passage id) lists -> hydrated hits, reranked when asked, cut to k_out. Shared by the
    single-node and the sharded search: `passage_of` finds a passage wherever it lives (None: deleted)."""
    out = []
    for query, (top, ranks) in zip(queries, results, strict=True):
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
            out.append(SearchResult(hits=hits[:k_out], took_ms=took_ms))
            continue
        hits, outcome = rerank(query, hits)  # after fusion and hydration: the reranker reads passage texts
        out.append(SearchResult(hits=hits[:k_out], took_ms=took_ms + outcome.took_ms, rerank=outcome))
    return out
