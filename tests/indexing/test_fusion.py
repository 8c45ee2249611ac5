from __future__ import annotations

import pytest

from indexing.fusion import reciprocal_rank_fusion


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
