"""Fusing a dense and a BM25 list: Reciprocal Rank Fusion, a normalised convex combination, or one list alone.

RRF (Cormack et al. 2009, as the Revela paper uses it, appendix A.5) reads only ranks. The convex
combination, alpha * norm(dense) + (1 - alpha) * norm(bm25), reads scores: Bruch et al. 2023 ("An Analysis
of Fusion Functions for Hybrid Retrieval") find it better than RRF once alpha suits the collection, and
little sensitive to the normalisation. Which fusion suits a collection is chosen without labels by
indexing/fusion_choice.py; docs/fusion.md says why and where it fails.

Every function here is deterministic: sums run in a fixed order, and equal fused scores keep the order of
first appearance (the runs in the order given, each best first), as the engine's lists do.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from indexing.fusion_normalize import (
    Normalization,
    Scored,
    normalize,
    normalized_columns,
    normalized_sum,
)

Method = Literal["rrf", "convex", "dense", "bm25"]
METHODS: tuple[str, ...] = ("rrf", "convex", "dense", "bm25")
NORMALIZATIONS: tuple[str, ...] = ("minmax", "zscore", "dbsf")


@dataclass(frozen=True)
class FusionSpec:
    """How a hybrid search fuses its two lists (plain data: it crosses to Ray actors inside RankRequest).

    method: "rrf", "convex", or "dense" / "bm25" (that list alone). alpha: dense's share; for "convex" the
    weight of norm(dense) (None: 0.5), for "rrf" the weights become {dense: 2 alpha, bm25: 2 (1 - alpha)} so
    that 0.5 is plain RRF (None: the request's own RRF weights). normalization: of each list's scores, for
    "convex" only."""

    method: Method = "rrf"
    alpha: float | None = None
    normalization: Normalization = "minmax"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"fusion method must be one of {METHODS}, got {self.method!r}")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"fusion normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}")
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"fusion alpha must be within [0, 1], got {self.alpha}")

    @property
    def label(self) -> str:
        """A short name: rrf, rrf-a0.7, convex-zscore-a0.6, dense, bm25."""
        if self.method in ("dense", "bm25"):
            return self.method
        alpha = "" if self.alpha is None else f"-a{self.alpha:g}"
        return f"convex-{self.normalization}{alpha}" if self.method == "convex" else f"rrf{alpha}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method}
        if self.alpha is not None:
            out["alpha"] = self.alpha
        if self.method == "convex":
            out["normalization"] = self.normalization
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> FusionSpec:
        """From a request's or a collection's fusion object (other keys, e.g. how it was chosen, are ignored)."""
        if not d:
            return cls()
        alpha = d.get("alpha")
        return cls(
            method=d.get("method", "rrf"),
            alpha=None if alpha is None else float(alpha),
            normalization=d.get("normalization") or "minmax",
        )


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


def fuse_runs(
    runs: Mapping[str, Scored],
    spec: FusionSpec,
    *,
    rrf_k: int = 60,
    depth: int = 200,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[Hashable, float]]:
    """One query's fused (unit, score) list, best first, from its runs ("dense", "bm25") by `spec`, each run
    read to `depth` (a single-list method too). `weights` (per-run RRF weights) apply to RRF when the spec gives
    no alpha."""
    if spec.method in ("dense", "bm25"):
        return [(key, float(score)) for key, score in runs.get(spec.method, [])[:depth]]
    if spec.method == "convex":
        alpha = 0.5 if spec.alpha is None else spec.alpha
        return normalized_sum(
            runs, {"dense": alpha, "bm25": 1.0 - alpha}, normalization=spec.normalization, depth=depth
        )
    if spec.alpha is not None:
        weights = {"dense": 2.0 * spec.alpha, "bm25": 2.0 * (1.0 - spec.alpha)}
    return reciprocal_rank_fusion(
        {name: [key for key, _ in run] for name, run in runs.items()}, k=rrf_k, depth=depth, weights=weights
    )


def fused_columns(
    keys: Mapping[str, Sequence[Hashable]],
    scores: Mapping[str, Sequence[float]],
    spec: FusionSpec,
    *,
    rrf_k: int = 60,
    depth: int = 200,
    weights: Mapping[str, float] | None = None,
) -> tuple[list[Hashable], np.ndarray] | None:
    """`fuse_runs` for RRF and convex over runs given as parallel key and score lists, unsorted: every unit in
    order of first appearance and its fused score, equal bit for bit to fuse_runs' (a stable sort by descending
    score gives fuse_runs' list). None where fuse_runs must do it: the single-list methods, a run naming a unit
    twice."""
    cut = {name: run[:depth] for name, run in keys.items()}
    if spec.method == "convex":
        alpha = 0.5 if spec.alpha is None else spec.alpha
        return normalized_columns(
            cut,
            {name: scores[name][:depth] for name in cut},
            {"dense": alpha, "bm25": 1.0 - alpha},
            normalization=spec.normalization,
        )
    if spec.method != "rrf" or any(len(set(run)) != len(run) for run in cut.values()):
        return None
    if spec.alpha is not None:
        weights = {"dense": 2.0 * spec.alpha, "bm25": 2.0 * (1.0 - spec.alpha)}
    units = list(dict.fromkeys(itertools.chain.from_iterable(cut.values())))
    position = dict(zip(units, range(len(units)), strict=True))
    total = np.zeros(len(units))
    for name, run in cut.items():  # as reciprocal_rank_fusion: 0.0, then each run's w / (k + rank) in turn
        w = 1.0 if weights is None else float(weights.get(name, 1.0))
        rows = np.fromiter(map(position.__getitem__, run), np.int64, count=len(run))
        total[rows] = total[rows] + w / (rrf_k + np.arange(1, len(run) + 1))
    return units, total


def fusion_in_force(
    request: Mapping[str, Any] | None, stored: Mapping[str, Any] | None, *, weights_given: bool = False
) -> FusionSpec:
    """The fusion a hybrid search uses: the request's own; with none (or method "auto") the collection's
    stored choice, except that a request giving per-list RRF weights and no fusion gets the weighted RRF it
    asked for."""
    if request and request.get("method", "auto") != "auto":
        return FusionSpec.from_json(request)
    return FusionSpec() if weights_given else FusionSpec.from_json(stored)


def rank_of(
    runs: Mapping[str, Scored],
    unit: Hashable,
    specs: Sequence[FusionSpec],
    *,
    rrf_k: int = 60,
    depth: int = 200,
) -> list[int]:
    """The 1-based rank `unit` gets under each spec (0: not in the fused list), as fuse_runs would rank it,
    without building and sorting each fused list: a chooser scores dozens of fusions over hundreds of queries.
    The fused scores are computed with the same operations in the same order, so ties fall alike: the unit
    comes after every unit scoring higher and every equal one that appears before it."""
    cut = {name: list(run[:depth]) for name, run in runs.items()}
    order: dict[Hashable, int] = {}
    for run in cut.values():
        for key, _ in run:
            order.setdefault(key, len(order))
    if unit not in order:
        return [0] * len(specs)
    t = order[unit]
    n = len(order)
    position = {name: {key: i for i, (key, _) in enumerate(run)} for name, run in cut.items()}
    cache: dict[tuple[str, str], np.ndarray] = {}

    def column(name: str, kind: str) -> np.ndarray:
        """Per unit (in order of appearance), what run `name` gives it: its 1-based rank (0 when missing)
        for "rank", else its normalised score (the run's floor when missing)."""
        if (name, kind) not in cache:
            run = cut.get(name, [])
            if kind == "rank":
                values, floor = [float(i + 1) for i in range(len(run))], 0.0
            else:
                values, floor = normalize([float(s) for _, s in run], kind)  # type: ignore[arg-type]
            col = np.full(n, floor)
            for (key, _), v in zip(run, values, strict=True):
                col[order[key]] = v
            cache[(name, kind)] = col
        return cache[(name, kind)]

    out = []
    for spec in specs:
        if spec.method in ("dense", "bm25"):
            out.append(position.get(spec.method, {}).get(unit, -1) + 1)
            continue
        total = np.zeros(n)
        if spec.method == "convex":
            alpha = 0.5 if spec.alpha is None else spec.alpha
            weights = {"dense": alpha, "bm25": 1.0 - alpha}
            for name in cut:
                total = total + float(weights.get(name, 0.0)) * column(name, spec.normalization)
        else:
            w = {"dense": 2.0 * spec.alpha, "bm25": 2.0 * (1.0 - spec.alpha)} if spec.alpha is not None else {}
            for name in cut:
                ranks = column(name, "rank")
                total = total + np.where(ranks > 0, float(w.get(name, 1.0)) / (rrf_k + ranks), 0.0)
        s = total[t]
        out.append(1 + int(np.count_nonzero(total > s)) + int(np.count_nonzero(total[:t] == s)))
    return out
