"""The plots of `vela eval --report`: metric bars, per-query NDCG@10 scatters, latency distributions.

matplotlib's object API on the Agg canvas (no pyplot): no global figure state, no display needed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 110
COLORS = [  # tab10: this run's series first, the baselines after
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]


def _save(fig: Figure, path: Path) -> None:
    FigureCanvasAgg(fig)  # the Agg canvas, whatever backend matplotlib would pick
    fig.savefig(path, dpi=DPI, bbox_inches="tight")


def metric_bars(
    path: Path,
    *,
    metrics: Sequence[str],
    groups: Sequence[str],
    series: Sequence[tuple[str, Mapping[str, Mapping[str, float]]]],
) -> None:
    """One panel per metric; in each, a group of bars per mode (or external run), one bar per series
    (this run's variants, then each baseline). A series without a figure for a group leaves a gap."""
    width = 0.8 / max(1, len(series))
    panel = max(4.5, 1.0 + 0.35 * len(groups) * len(series))
    fig = Figure(figsize=(panel * len(metrics), 4.2 + 0.25 * ((len(series) + 3) // 4)), layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    x = np.arange(len(groups))
    for ax, metric in zip(axes, metrics, strict=True):
        for i, (label, by_group) in enumerate(series):
            values = [by_group.get(g, {}).get(metric, np.nan) for g in groups]
            bars = ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=label, color=COLORS[i % 10])
            if len(series) * len(groups) <= 12:  # the figures themselves, while they still fit
                texts = ["" if np.isnan(v) else f"{v:.3f}" for v in values]
                ax.bar_label(bars, labels=texts, fontsize=7, padding=1)
        ax.set_title(metric)
        ax.set_xticks(x, list(groups))
        ax.set_ylim(0, 1.08)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(series)), fontsize=8)
    _save(fig, path)


def ndcg_scatter(path: Path, *, x: Mapping[str, float], y: Mapping[str, float], x_label: str, y_label: str) -> None:
    """Each query a point: NDCG@10 of run x against run y. Above the diagonal y wins. Many queries land on
    the same spot (0 or 1 in both), so a point's area grows with how many queries it stands for."""
    qids = sorted(x)
    at = Counter((round(x[q], 3), round(y.get(q, 0.0), 3)) for q in qids)
    pts = sorted(at)  # a fixed drawing order: the same data gives the same picture
    xs, ys = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    sizes = 14 * np.sqrt(np.array([at[p] for p in pts]))
    fig = Figure(figsize=(4.6, 4.6))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, zorder=1)
    ax.scatter(xs, ys, s=sizes, alpha=0.45, color=COLORS[0], edgecolors="none", zorder=2)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_aspect("equal")
    ax.set_xlabel(f"{x_label}  NDCG@10")
    ax.set_ylabel(f"{y_label}  NDCG@10")
    ax.grid(alpha=0.3)
    wins = sum(y.get(q, 0.0) > x[q] for q in qids)
    losses = sum(y.get(q, 0.0) < x[q] for q in qids)
    ax.set_title(f"{y_label} better on {wins}, worse on {losses}, even on {len(qids) - wins - losses}", fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def latency_plots(path: Path, latency_ms: Mapping[str, Sequence[float]]) -> None:
    """Per mode: a histogram of single-query latency (left) and its CDF (right). The ms axis is logarithmic:
    BM25 and dense (or reranked) modes are often orders of magnitude apart."""
    fig = Figure(figsize=(10, 3.8))
    hist, cdf = fig.subplots(1, 2)
    every = np.concatenate([np.asarray(v, dtype=float) for v in latency_ms.values()])
    every = every[every > 0]
    lo, hi = (float(every.min()) * 0.9, float(every.max()) * 1.1) if every.size else (0.1, 1.0)
    bins = np.geomspace(lo, hi, 50)
    for i, (mode, values) in enumerate(latency_ms.items()):
        v = np.sort(np.clip(np.asarray(values, dtype=float), lo, hi))
        color = COLORS[i % 10]
        hist.hist(v, bins=bins, histtype="step", linewidth=1.5, color=color, label=mode)
        cdf.step(v, np.arange(1, v.size + 1) / v.size, where="post", color=color, linewidth=1.5, label=mode)
        cdf.axvline(float(np.percentile(v, 50)), color=color, linewidth=0.8, linestyle=":")
    hist.set_ylabel("queries")
    hist.set_title("latency histogram")
    cdf.set_ylabel("share of queries at or below")
    cdf.set_title("latency CDF (dotted: p50)")
    cdf.set_ylim(0, 1.01)
    for ax in (hist, cdf):
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.set_xlabel("ms per query")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
