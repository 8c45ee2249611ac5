"""Reciprocal Rank Fusion (Cormack et al. 2009), as the Revela paper uses it (appendix A.5)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence


def reciprocal_rank_fusion(
    runs: Mapping[str, Sequence[Hashable]],
    *,
    k: int = 60,
    depth: int = 200,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[Hashable, float]]:
    """score(d) = sum over runs containing d of w_run / (k + rank_run(d)), ranks 1-based.

    Each run is cut to `depth` first; items missing from a run get nothing from it. Ties keep the order of
    first appearance (runs in the order given), so the fused list is deterministic.
    """
    scores: dict[Hashable, float] = {}
    for name, run in runs.items():
        w = 1.0 if weights is None else float(weights.get(name, 1.0))
        for rank, item in enumerate(run[:depth], start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])
