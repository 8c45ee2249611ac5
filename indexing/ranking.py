"""From passage lists to ranked units: one shard's top units per run, the shards merged, then fused.

A unit is a document (group_by_doc) or a passage. A document scores as its best passage. Equal scores are
ordered by passage id: passage ids are the same whatever the segments and shards, so every layout orders
alike, and a merge of the shards' lists by (score, passage id) is exact (each document lives in one shard,
so the global top n of a run is among the shards' top n).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from indexing import deadline, stage_clock
from indexing.filters import Node
from indexing.fusion import FusionSpec, fuse_runs, fused_columns
from indexing.postings import TermStats
from indexing.shard_view import Lists, ShardView

Mode = Literal["dense", "bm25", "hybrid"]
Dim = Literal["full", "256"]
RUNS: tuple[str, ...] = ("dense", "bm25")
RESCORE_FACTOR = 4  # dim=256: the prefix index shortlists 4x the passages needed, full dims rank them
TIE_WIDEN = 16  # at most this many times the first fetch, to see every passage tied at the cut
Ranked = list[tuple[Any, float, int]]  # (unit key, score, representative passage id), best first


@dataclass(frozen=True)
class RankRequest:
    """What one search asks of every shard (plain data: it crosses to Ray actors)."""

    mode: Mode = "hybrid"
    k: int = 10
    dim: Dim = "full"
    rrf_k: int = 60
    depth: int = 200
    weights: Mapping[str, float] | None = None
    group_by_doc: bool = True
    rescore: bool = True
    filter: Node | None = None  # parsed (indexing/filters.py): applied inside every retriever
    fusion: FusionSpec | None = None  # hybrid: how the lists are fused (None: RRF with rrf_k and weights)
    score_threshold: float | None = None  # units whose final (fused) score is below it are left out

    @property
    def n(self) -> int:
        """Units each run contributes before fusion."""
        return max(self.k, self.depth) if self.mode == "hybrid" else self.k


@dataclass(frozen=True)
class Fused:
    """One query's result: (unit key, score, passage id) best first, each unit's 1-based rank per run, and
    the shard of each passage id."""

    top: Ranked
    ranks: dict[str, dict[Any, int]]
    shard_of: dict[int, int] = field(default_factory=dict)


def group(lists: Lists, key_of: Callable[[np.ndarray], np.ndarray] | None, n: int) -> list[Ranked]:
    """Per query: the first n distinct units of a (score desc, passage id) list."""
    out: list[Ranked] = []
    for pids, scores in lists:
        keys = key_of(pids) if key_of is not None and len(pids) else pids
        # Each unit's first passage in list order: np.unique's first indices, put back in list order.
        first = np.sort(np.unique(keys, return_index=True)[1])[:n]
        out.append(list(zip(keys[first].tolist(), scores[first].tolist(), pids[first].tolist(), strict=True)))
    return out


def widening(fetch_lists: Callable[[int], Lists], total: int, n: int, key_of: Any) -> list[Ranked]:
    """Fetch enough passages that n distinct units come out: widen when documents repeat, and when the last
    unit kept ties the last passage fetched (up to TIE_WIDEN times the first fetch): which of tied passages
    an index returns at its cut is arbitrary, and the ones left out may come first by id."""
    # Passages: one more than n, so that a cut with no tie is seen at once (fetching exactly n, the last unit
    # kept is always the last passage fetched, and would always widen).
    first = fetch = min(total, n * 3 if key_of is not None else n + 1)
    while True:
        deadline.check()  # each widening is another search of every query
        lists = fetch_lists(fetch)
        ranked = group(lists, key_of, n)
        full = [len(p) == fetch for p, _ in lists]
        short = any(len(r) < n and f for r, f in zip(ranked, full, strict=True))
        tied = fetch < first * TIE_WIDEN and any(
            f and len(r) == n and len(s) and float(s.min()) >= r[-1][1]
            for r, f, (_, s) in zip(ranked, full, lists, strict=True)
        )
        if not (short or tied) or fetch >= total:
            return ranked
        fetch = min(total, fetch * 4)


def rank_shard(
    view: ShardView, qv: np.ndarray | None, tokens: Sequence[list[str]], stats: TermStats | None, req: RankRequest
) -> list[dict[str, Ranked]]:
    """Per query, each run's top n units of this shard: what the shard contributes before the merge."""
    key_of = view.doc_numbers if req.group_by_doc else None
    scope = view.scope_for(req.filter)
    runs: dict[str, list[Ranked]] = {}
    if qv is not None:
        deadline.check()  # before each list: a request past its deadline (its client has a 503) stops here
        small, factor = req.dim != "full", RESCORE_FACTOR if req.rescore else 0
        with stage_clock.stage("dense"):
            runs["dense"] = widening(lambda f: view.dense(qv, f, small, factor, scope), scope.n, req.n, key_of)
    if req.mode in ("bm25", "hybrid") and stats is not None:
        deadline.check()
        with stage_clock.stage("bm25"):
            runs["bm25"] = _bm25_units(view, tokens, stats, scope, req.n, key_of)
    return [{name: r[qi] for name, r in runs.items()} for qi in range(len(tokens))]


def _bm25_units(
    view: ShardView, tokens: Sequence[list[str]], stats: TermStats, scope: Any, n: int, key_of: Any
) -> list[Ranked]:
    """Each query's top n BM25 units from its best-scoring passages only: sorting and grouping every passage
    that shares a term costs ~1 ms a query on 10k passages. The cut widens when documents repeat so much that
    the passages kept hold fewer than n units."""
    cut = n * 3 if key_of is not None else n
    while True:
        deadline.check()  # a cut widened again: each pass is another scoring of every query
        lists = view.bm25(tokens, stats, scope, cut)
        ranked = group(lists, key_of, n)
        if all(len(r) >= n or len(p) < cut for r, (p, _) in zip(ranked, lists, strict=True)):
            return ranked
        cut *= 4


def merge_shards(per_shard: Sequence[dict[str, Ranked]], n: int) -> tuple[dict[str, Ranked], dict[int, int]]:
    """One query: each run's lists from every shard merged by (score, passage id), top n; unit keys become
    (shard, key) since local keys repeat across shards. Also each passage's shard."""
    merged: dict[str, Ranked] = {}
    shard_of: dict[int, int] = {}
    if len(per_shard) == 1:  # one shard's runs are in (score desc, passage id) order already: nothing to merge
        for name, run in per_shard[0].items():
            merged[name] = [((0, key), score, pid) for key, score, pid in run[:n]]
            shard_of.update(dict.fromkeys([pid for _, _, pid in run], 0))
        return merged, shard_of
    for name in per_shard[0] if per_shard else ():
        units = [((s, key), score, pid) for s, runs in enumerate(per_shard) for key, score, pid in runs[name]]
        units.sort(key=lambda u: (-u[1], u[2]))
        merged[name] = units[:n]
    for s, runs in enumerate(per_shard):
        for run in runs.values():
            shard_of.update((pid, s) for _, _, pid in run)
    return merged, shard_of


def fuse(per_run: dict[str, Ranked], req: RankRequest) -> tuple[Ranked, dict[str, dict[Any, int]]]:
    """One query's top k (those scoring at least req.score_threshold, when set), and each unit's rank in each
    run. The threshold cuts here, before hydration and the rerank stage, so a cut hit costs nothing more."""
    top, ranks = _fuse(per_run, req)
    if req.score_threshold is not None:
        top = [t for t in top if t[1] >= req.score_threshold]
    return top, ranks


def _fuse(per_run: dict[str, Ranked], req: RankRequest) -> tuple[Ranked, dict[str, dict[Any, int]]]:
    keys = {name: [key for key, _, _ in r] for name, r in per_run.items()}
    ranks = {name: dict(zip(k, range(1, len(k) + 1), strict=True)) for name, k in keys.items()}
    if req.mode != "hybrid":
        return per_run[req.mode][: req.k], ranks
    # Fusion reads each list to `depth` only (the engine may have fetched deeper): a rank past it is shown as
    # absent, as it counted for nothing in the score.
    ranks = {name: {key: r for key, r in rk.items() if r <= req.depth} for name, rk in ranks.items()}
    rep: dict[Any, int] = {}  # the passage shown for a fused unit: its best dense passage, else its best BM25 one
    for name in ("bm25", "dense"):
        rep.update(zip(keys.get(name, []), [pid for _, _, pid in per_run.get(name, [])], strict=True))
    spec = req.fusion or FusionSpec()
    scores = {name: [float(score) for _, score, _ in r] for name, r in per_run.items()}
    columns = fused_columns(keys, scores, spec, rrf_k=req.rrf_k, depth=req.depth, weights=req.weights)
    if columns is not None:  # the same scores as fuse_runs', without sorting the units below the k best
        units, total = columns
        best = np.argsort(-total, kind="stable")[: req.k].tolist()
        return [(units[i], float(total[i]), rep[units[i]]) for i in best], ranks
    fused = fuse_runs(
        {name: [(key, score) for key, score, _ in r] for name, r in per_run.items()},
        spec,
        rrf_k=req.rrf_k,
        depth=req.depth,
        weights=req.weights,
    )
    return [(key, score, rep[key]) for key, score in fused[: req.k]], ranks
