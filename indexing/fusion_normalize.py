"""Normalising a run's scores and summing runs by weight: the convex combination's arithmetic (indexing/fusion.py).

Deterministic: sums run in a fixed order (math.fsum for the statistics), and the numpy path (`normalized_columns`)
does the same IEEE operations in the same order as the loop over units (`_normalized_sum_loop`), so the two give
equal scores bit for bit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal

import numpy as np

Normalization = Literal["minmax", "zscore", "dbsf"]
Scored = Sequence[tuple[Hashable, float]]  # one run: (unit, score), best first


def normalize(scores: Sequence[float], method: Normalization) -> tuple[list[float], float]:
    """A list's scores normalised, and the value a unit missing from the list gets: the list's minimum after
    normalisation. A unit below the cut scored at most the last score kept, so the minimum is the closest
    value that never ranks it above a unit the list holds; 0 would, for z-scores, put it at the list's mean.

    minmax: (s - min) / (max - min). zscore: (s - mean) / std. dbsf (Qdrant's distribution-based score
    fusion): (s - (mean - 3 std)) / (6 std), clipped to [0, 1]. A flat list (all scores equal, or one
    score) says only which units it holds: 1 for each of them, 0 for a missing one."""
    n = len(scores)
    if n == 0:
        return [], 0.0
    lo, hi = min(scores), max(scores)
    if hi <= lo:
        return [1.0] * n, 0.0
    if method == "minmax":
        out = [(s - lo) / (hi - lo) for s in scores]
    else:
        mean = math.fsum(scores) / n
        std = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / n)
        if method == "zscore":
            out = [(s - mean) / std for s in scores]
        elif method == "dbsf":
            low = mean - 3.0 * std
            out = [min(1.0, max(0.0, (s - low) / (6.0 * std))) for s in scores]
        else:
            raise ValueError(f"unknown normalization {method!r}")
    return out, min(out)


def normalized_sum(
    runs: Mapping[str, Scored], weights: Mapping[str, float], *, normalization: Normalization, depth: int = 200
) -> list[tuple[Hashable, float]]:
    """sum over runs of w_run * norm_run(d), each run cut to `depth` and normalised over what is kept; a unit
    missing from a run gets that run's minimum (see normalize). Ties keep the order of first appearance."""
    keys = {name: [key for key, _ in run[:depth]] for name, run in runs.items()}
    scores = {name: [float(s) for _, s in run[:depth]] for name, run in runs.items()}
    fused = normalized_columns(keys, scores, weights, normalization=normalization)
    if fused is None:
        return _normalized_sum_loop(keys, scores, weights, normalization=normalization)
    units, total = fused
    return [(units[i], float(total[i])) for i in np.argsort(-total, kind="stable").tolist()]


def normalized_columns(
    keys: Mapping[str, Sequence[Hashable]],
    scores: Mapping[str, Sequence[float]],
    weights: Mapping[str, float],
    *,
    normalization: Normalization,
) -> tuple[list[Hashable], np.ndarray] | None:
    """`normalized_sum` over runs given as parallel lists (already cut), unsorted: every unit in order of first
    appearance and its fused score (float64). The same operations in the same order as the loop over units
    (`_normalized_sum_loop`), done a run at a time in numpy, so the scores are equal bit for bit. None when a
    run names a unit twice (the loop's last-one-wins is left to the loop)."""
    if any(len(set(k)) != len(k) for k in keys.values()):
        return None
    units = list(dict.fromkeys(itertools.chain.from_iterable(keys.values())))
    position = dict(zip(units, range(len(units)), strict=True))
    total = np.zeros(len(units))
    for name, run_keys in keys.items():  # the runs in the order given: the same sum as the loop's
        values, floor = _normalize_array(scores[name], normalization)
        column = np.full(len(units), floor)
        column[list(map(position.__getitem__, run_keys))] = values
        total = total + float(weights.get(name, 0.0)) * column
    return units, total


def _normalize_array(scores: Sequence[float], method: Normalization) -> tuple[np.ndarray, float]:
    """`normalize` as a float64 array: elementwise the same IEEE operations (the sums stay math.fsum's)."""
    n = len(scores)
    if n == 0:
        return np.empty(0), 0.0
    lo, hi = min(scores), max(scores)
    if hi <= lo:
        return np.ones(n), 0.0
    s = np.asarray(scores, dtype=np.float64)
    if method == "minmax":
        out = (s - lo) / (hi - lo)
    else:
        mean = math.fsum(scores) / n
        std = math.sqrt(math.fsum([(x - mean) ** 2 for x in scores]) / n)
        if method == "zscore":
            out = (s - mean) / std
        elif method == "dbsf":
            low = mean - 3.0 * std
            out = np.minimum(1.0, np.maximum(0.0, (s - low) / (6.0 * std)))
        else:
            raise ValueError(f"unknown normalization {method!r}")
    return out, float(out.min())


def _normalized_sum_loop(
    keys: Mapping[str, Sequence[Hashable]],
    scores: Mapping[str, Sequence[float]],
    weights: Mapping[str, float],
    *,
    normalization: Normalization,
) -> list[tuple[Hashable, float]]:
    """normalized_sum one unit at a time (any run, a unit named twice in one included: the last one counts)."""
    normed: dict[str, tuple[dict[Hashable, float], float]] = {}
    order: dict[Hashable, None] = {}  # every unit, in order of first appearance
    for name, run_keys in keys.items():
        values, floor = normalize(scores[name], normalization)
        normed[name] = (dict(zip(run_keys, values, strict=True)), floor)
        order.update((key, None) for key in run_keys)
    fused = []
    for key in order:
        total = 0.0
        for name in keys:  # the runs in the order given: the same sum, bit for bit, every time
            by_key, floor = normed[name]
            total += float(weights.get(name, 0.0)) * by_key.get(key, floor)
        fused.append((key, total))
    return sorted(fused, key=lambda kv: -kv[1])
