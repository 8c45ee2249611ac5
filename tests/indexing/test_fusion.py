from __future__ import annotations

import math
import random

import pytest

from indexing.fusion import (
    FusionSpec,
    Normalization,
    fuse_runs,
    fusion_in_force,
    normalize,
    normalized_sum,
    rank_of,
    reciprocal_rank_fusion,
)
from indexing.ranking import RankRequest, fuse


def test_rrf_matches_the_formula() -> None:
    fused = dict(reciprocal_rank_fusion({"dense": ["a", "b", "c"], "bm25": ["c", "a"]}, k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)


def test_rrf_resorts_and_cuts_each_list_to_depth() -> None:
    fused = reciprocal_rank_fusion({"dense": ["a", "b", "c"], "bm25": ["c", "b", "x"]}, k=60, depth=2)
    assert [d for d, _ in fused] == ["b", "a", "c"]  # c only counts from bm25 (dense was cut at depth 2)
    assert dict(fused)["c"] == pytest.approx(1 / 61)


def test_rrf_weights_scale_each_list() -> None:
    fused = reciprocal_rank_fusion({"dense": ["a"], "bm25": ["b"]}, weights={"dense": 0.5, "bm25": 2.0})
    assert [d for d, _ in fused] == ["b", "a"]
    assert dict(fused)["a"] == pytest.approx(0.5 / 61)


def test_rrf_ties_keep_first_appearance() -> None:
    assert [d for d, _ in reciprocal_rank_fusion({"dense": ["a"], "bm25": ["b"]})] == ["a", "b"]


# --- normalisations ---------------------------------------------------------------------------------------
def test_minmax_maps_the_list_onto_0_1_and_a_missing_unit_gets_0() -> None:
    values, floor = normalize([4.0, 2.0, 1.0], "minmax")
    assert values == pytest.approx([1.0, 1 / 3, 0.0])
    assert floor == 0.0


def test_zscore_and_a_missing_unit_gets_the_lowest_z() -> None:
    scores = [3.0, 2.0, 1.0]
    std = math.sqrt(2 / 3)
    values, floor = normalize(scores, "zscore")
    assert values == pytest.approx([1 / std, 0.0, -1 / std])
    assert floor == pytest.approx(-1 / std)  # not 0: that would rank a unit the list left out above its last one


def test_dbsf_uses_three_sigma_limits_and_clips() -> None:
    scores = [10.0] + [0.0] * 99  # the outlier lies beyond mean + 3 std: clipped to 1
    values, floor = normalize(scores, "dbsf")
    mean, std = 0.1, math.sqrt(0.99)
    assert values[0] == 1.0
    assert values[1] == pytest.approx((0.0 - (mean - 3 * std)) / (6 * std))
    assert floor == pytest.approx(values[1])
    values, _ = normalize([3.0, 2.0, 1.0], "dbsf")
    assert values == pytest.approx([0.5 + 1 / (6 * math.sqrt(2 / 3)), 0.5, 0.5 - 1 / (6 * math.sqrt(2 / 3))])


@pytest.mark.parametrize("method", ["minmax", "zscore", "dbsf"])
def test_a_flat_or_empty_list_only_says_which_units_it_holds(method: Normalization) -> None:
    assert normalize([2.0, 2.0], method) == ([1.0, 1.0], 0.0)
    assert normalize([5.0], method) == ([1.0], 0.0)
    assert normalize([], method) == ([], 0.0)


# --- convex combination -----------------------------------------------------------------------------------
DENSE = [("a", 0.9), ("b", 0.7), ("c", 0.5)]
BM25 = [("c", 12.0), ("d", 6.0), ("a", 4.0)]


def test_convex_is_alpha_dense_plus_one_minus_alpha_bm25_and_missing_units_get_the_floor() -> None:
    fused = dict(normalized_sum({"dense": DENSE, "bm25": BM25}, {"dense": 0.6, "bm25": 0.4}, normalization="minmax"))
    # dense minmax: a 1, b 0.5, c 0; bm25 minmax: c 1, d 0.25, a 0; b misses bm25, d misses dense (floor 0)
    assert fused["a"] == pytest.approx(0.6 * 1.0 + 0.4 * 0.0)
    assert fused["b"] == pytest.approx(0.6 * 0.5 + 0.4 * 0.0)
    assert fused["c"] == pytest.approx(0.6 * 0.0 + 0.4 * 1.0)
    assert fused["d"] == pytest.approx(0.6 * 0.0 + 0.4 * 0.25)


def test_convex_alpha_one_and_zero_give_each_list_alone() -> None:
    runs = {"dense": DENSE, "bm25": BM25}
    only_dense = fuse_runs(runs, FusionSpec("convex", alpha=1.0, normalization="zscore"))
    assert [k for k, _ in only_dense][:3] == ["a", "b", "c"]
    only_bm25 = fuse_runs(runs, FusionSpec("convex", alpha=0.0, normalization="zscore"))
    assert [k for k, _ in only_bm25][:3] == ["c", "d", "a"]


def test_convex_normalises_over_each_lists_top_depth() -> None:
    runs = {"dense": [("a", 1.0), ("b", 0.5), ("c", 0.0)], "bm25": [("c", 2.0), ("a", 1.0), ("b", 0.0)]}
    fused = dict(fuse_runs(runs, FusionSpec("convex", alpha=0.5), depth=2))
    # cut to 2: dense a 1, b 0 (c missing: 0); bm25 c 1, a 0 (b missing: 0)
    assert fused == pytest.approx({"a": 0.5, "b": 0.0, "c": 0.5})


def test_convex_ties_keep_first_appearance_and_repeat_bit_for_bit() -> None:
    runs = {"dense": [("x", 1.0), ("y", 0.0)], "bm25": [("y", 3.0), ("x", 1.0)]}
    fused = fuse_runs(runs, FusionSpec("convex", alpha=0.5))
    assert fused == [("x", 0.5), ("y", 0.5)]
    assert fused == fuse_runs(runs, FusionSpec("convex", alpha=0.5))


# --- weighted RRF and one list alone ----------------------------------------------------------------------
def test_rrf_alpha_half_is_plain_rrf_and_other_alphas_weight_the_lists() -> None:
    keys = {"dense": ["a", "b"], "bm25": ["b", "c"]}
    runs = {name: [(k, 1.0) for k in ks] for name, ks in keys.items()}
    assert fuse_runs(runs, FusionSpec("rrf", alpha=0.5)) == reciprocal_rank_fusion(keys)
    weighted = fuse_runs(runs, FusionSpec("rrf", alpha=0.7))
    expected = reciprocal_rank_fusion(keys, weights={"dense": 1.4, "bm25": 0.6})
    assert [k for k, _ in weighted] == [k for k, _ in expected]
    assert [s for _, s in weighted] == pytest.approx([s for _, s in expected])
    assert fuse_runs(runs, FusionSpec("rrf"), weights={"dense": 3.0}) == reciprocal_rank_fusion(
        keys, weights={"dense": 3.0}
    )


def test_one_list_alone_keeps_its_order_and_scores() -> None:
    runs = {"dense": DENSE, "bm25": BM25}
    assert fuse_runs(runs, FusionSpec("dense")) == DENSE
    assert fuse_runs(runs, FusionSpec("bm25")) == BM25


# --- the spec, and which fusion a search uses -------------------------------------------------------------
def test_spec_checks_round_trips_and_names_itself() -> None:
    spec = FusionSpec("convex", alpha=0.7, normalization="dbsf")
    assert FusionSpec.from_json(spec.to_json()) == spec
    assert spec.label == "convex-dbsf-a0.7"
    assert FusionSpec.from_json({"method": "rrf", "chosen": {"documents": 10}}) == FusionSpec()
    assert FusionSpec.from_json(None) == FusionSpec()
    with pytest.raises(ValueError):
        FusionSpec("convex", alpha=1.5)
    with pytest.raises(ValueError):
        FusionSpec("sum")  # type: ignore[arg-type]


def test_fusion_in_force_prefers_the_request_then_the_stored_choice() -> None:
    stored = {"method": "convex", "alpha": 0.8, "normalization": "zscore", "chosen": {}}
    assert fusion_in_force(None, stored) == FusionSpec("convex", alpha=0.8, normalization="zscore")
    assert fusion_in_force({"method": "auto"}, stored) == FusionSpec("convex", alpha=0.8, normalization="zscore")
    assert fusion_in_force({"method": "bm25"}, stored) == FusionSpec("bm25")
    assert fusion_in_force(None, stored, weights_given=True) == FusionSpec()  # weights ask for RRF
    assert fusion_in_force(None, None) == FusionSpec()


def test_engine_fuse_uses_the_requests_fusion_and_shows_each_units_passage() -> None:
    per_run = {"dense": [("a", 0.9, 1), ("b", 0.1, 2)], "bm25": [("b", 9.0, 3), ("c", 1.0, 4)]}
    top, ranks = fuse(per_run, RankRequest(k=3, fusion=FusionSpec("convex", alpha=0.2)))
    assert [(key, pid) for key, _, pid in top] == [("b", 2), ("a", 1), ("c", 4)]
    assert ranks == {"dense": {"a": 1, "b": 2}, "bm25": {"b": 1, "c": 2}}
    top, _ = fuse(per_run, RankRequest(k=3))  # no fusion: RRF as before
    assert [key for key, _, _ in top] == [
        key for key, _ in reciprocal_rank_fusion({"dense": ["a", "b"], "bm25": ["b", "c"]})
    ]


def test_rank_of_agrees_with_the_fused_lists_ties_included() -> None:
    rng = random.Random(0)
    specs = [FusionSpec("rrf"), FusionSpec("dense"), FusionSpec("bm25"), FusionSpec("rrf", alpha=0.3)]
    specs += [FusionSpec("convex", alpha=a, normalization=n) for n in ("minmax", "zscore", "dbsf") for a in (0.2, 0.7)]
    for _ in range(200):
        pool = [f"u{i}" for i in range(12)]
        runs = {
            name: [(u, float(rng.choice([1, 2, 2, 3, 5]))) for u in rng.sample(pool, rng.randrange(0, 9))]
            for name in ("dense", "bm25")
        }
        runs = {name: sorted(run, key=lambda kv: -kv[1]) for name, run in runs.items()}
        unit = rng.choice(pool)
        got = rank_of(runs, unit, specs, depth=6)
        for spec, rank in zip(specs, got, strict=True):
            keys = [k for k, _ in fuse_runs(runs, spec, depth=6)]
            if spec.method in ("dense", "bm25"):
                keys = keys[:6]
            assert rank == (keys.index(unit) + 1 if unit in keys else 0), (spec, runs, unit)


def test_one_list_alone_is_read_to_depth() -> None:
    runs = {"dense": DENSE, "bm25": BM25}
    assert fuse_runs(runs, FusionSpec("dense"), depth=2) == DENSE[:2]
    assert fuse_runs(runs, FusionSpec("bm25"), depth=1) == BM25[:1]
