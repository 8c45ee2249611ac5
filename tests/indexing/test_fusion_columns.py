"""The array paths of fusion and ranking give the loops' results bit for bit: fused scores, order, ties."""

from __future__ import annotations

import random
from collections.abc import Hashable
from typing import Any

import numpy as np
import pytest

from indexing.fusion import (
    FusionSpec,
    fuse_runs,
    fused_columns,
    normalized_sum,
    reciprocal_rank_fusion,
)
from indexing.fusion_normalize import _normalized_sum_loop
from indexing.ranking import Ranked, RankRequest, fuse, group, merge_shards


def _runs(rng: random.Random, unique: bool = True) -> dict[str, list[tuple[Hashable, float]]]:
    pool = list(range(rng.randint(1, 60)))

    def run() -> list[tuple[Hashable, float]]:
        n = rng.randint(0, 50)
        keys = rng.sample(pool, min(n, len(pool))) if unique else [rng.choice(pool) for _ in range(n)]
        scores = sorted((rng.choice([0.5, 0.25, rng.random(), 10 * rng.random()]) for _ in keys), reverse=True)
        return list(zip(keys, scores, strict=True))

    return {"dense": run(), "bm25": run()}


@pytest.mark.parametrize("unique", [True, False])
@pytest.mark.parametrize("normalization", ["minmax", "zscore", "dbsf"])
def test_normalized_sum_equals_the_loop(normalization: Any, unique: bool) -> None:
    rng = random.Random(7)
    for _ in range(200):
        runs = _runs(rng, unique)
        depth = rng.choice([3, 20, 200])
        keys = {name: [k for k, _ in run[:depth]] for name, run in runs.items()}
        scores = {name: [float(s) for _, s in run[:depth]] for name, run in runs.items()}
        weights = {"dense": 0.3, "bm25": 0.7}
        want = _normalized_sum_loop(keys, scores, weights, normalization=normalization)
        assert repr(normalized_sum(runs, weights, normalization=normalization, depth=depth)) == repr(want)


@pytest.mark.parametrize(
    "spec", [FusionSpec("rrf"), FusionSpec("rrf", 0.8), FusionSpec("convex", 0.4, "zscore"), FusionSpec("convex")]
)
def test_fused_columns_sorted_are_fuse_runs(spec: FusionSpec) -> None:
    rng = random.Random(11)
    for _ in range(200):
        runs = _runs(rng)
        depth, weights = rng.choice([3, 20, 200]), rng.choice([None, {"dense": 2.0}])
        keys = {name: [k for k, _ in run] for name, run in runs.items()}
        scores = {name: [s for _, s in run] for name, run in runs.items()}
        columns = fused_columns(keys, scores, spec, rrf_k=60, depth=depth, weights=weights)
        assert columns is not None
        units, total = columns
        got = [(units[i], float(total[i])) for i in np.argsort(-total, kind="stable").tolist()]
        assert repr(got) == repr(fuse_runs(runs, spec, rrf_k=60, depth=depth, weights=weights))


def test_rrf_columns_match_reciprocal_rank_fusion_and_decline_repeats() -> None:
    runs: dict[str, list[Hashable]] = {"dense": ["a", "b", "c"], "bm25": ["c", "a", "d"]}
    units, total = fused_columns(runs, {n: [1.0] * 3 for n in runs}, FusionSpec("rrf")) or ([], np.empty(0))
    assert repr(sorted(zip(units, total.tolist(), strict=True), key=lambda kv: -kv[1])) == repr(
        reciprocal_rank_fusion(runs)
    )
    assert fused_columns({"dense": ["a", "a"]}, {"dense": [1.0, 0.5]}, FusionSpec("rrf")) is None
    assert fused_columns({"dense": ["a"]}, {"dense": [1.0]}, FusionSpec("dense")) is None


def _group_loop(pids: np.ndarray, scores: np.ndarray, keys: list[Any], n: int) -> Ranked:
    seen: set[Any] = set()
    out: Ranked = []
    for key, pid, score in zip(keys, pids.tolist(), scores.tolist(), strict=True):
        if key not in seen:
            seen.add(key)
            out.append((key, float(score), pid))
            if len(out) == n:
                break
    return out


def test_group_keeps_each_units_first_passage_in_list_order() -> None:
    rng = np.random.default_rng(3)
    docs = rng.integers(0, 25, 1000)
    for _ in range(100):
        pids = rng.choice(1000, size=int(rng.integers(0, 80)), replace=False).astype(np.int64)
        scores = np.sort(rng.choice([0.5, 0.25, 0.125], size=pids.shape[0]).astype(np.float32))[::-1]
        n = int(rng.integers(1, 40))
        (by_doc,) = group([(pids, scores)], lambda p: docs[p], n)
        assert by_doc == _group_loop(pids, scores, docs[pids].tolist(), n)
        (by_pid,) = group([(pids, scores)], None, n)
        assert by_pid == _group_loop(pids, scores, pids.tolist(), n)


def test_one_shard_merges_as_many_do() -> None:
    run: Ranked = [(3, 0.9, 30), (1, 0.9, 31), (2, 0.5, 12), (7, 0.1, 70)]
    merged, shard_of = merge_shards([{"dense": run, "bm25": run[:2]}], 3)
    assert merged == {
        "dense": [((0, 3), 0.9, 30), ((0, 1), 0.9, 31), ((0, 2), 0.5, 12)],
        "bm25": [((0, 3), 0.9, 30), ((0, 1), 0.9, 31)],
    }
    assert shard_of == {30: 0, 31: 0, 12: 0, 70: 0}
    two, _ = merge_shards([{"dense": run}, {"dense": []}], 3)
    assert two["dense"] == merged["dense"]


def test_fuse_takes_the_k_best_of_the_fused_list() -> None:
    per_run: dict[str, Ranked] = {
        "dense": [("a", 0.9, 1), ("b", 0.8, 2), ("c", 0.1, 3)],
        "bm25": [("c", 9.0, 4), ("d", 5.0, 5), ("a", 1.0, 6)],
    }
    for spec in (FusionSpec("rrf"), FusionSpec("convex", 0.5, "minmax"), FusionSpec("bm25")):
        top, ranks = fuse(per_run, RankRequest(k=2, fusion=spec))
        fused = fuse_runs({n: [(k, s) for k, s, _ in r] for n, r in per_run.items()}, spec)
        rep: dict[Hashable, int] = {"a": 1, "b": 2, "c": 3, "d": 5}
        assert top == [(k, s, rep[k]) for k, s in fused[:2]]
        assert ranks == {"dense": {"a": 1, "b": 2, "c": 3}, "bm25": {"c": 1, "d": 2, "a": 3}}
