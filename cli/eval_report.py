"""`vela eval --run-dir` and `--report`: TREC run files, the baselines a report compares with, and the report.

A run here is what Vela scored: qid -> {doc id: score}, the scores strictly decreasing with the rank (see
`eval_runs.search_mode`). The run files carry those scores as they are, so a tool that orders by score and
breaks ties by doc id (trec_eval, ir-measures) sees Vela's own order and computes Vela's own figures."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ir_measures

from cli import eval_html
from velaio.measures import Run, per_query_ndcg, score_run

MODES = ("bm25", "dense", "hybrid")


@dataclass(frozen=True)
class NamedRun:
    name: str  # the run file's stem: <mode>-<dim>[-norescore][-rerank[-w<weight>]]
    mode: str
    figure: str  # where the results JSON keeps this run's metrics, a JSON pointer: "/metrics/hybrid", "/baseline/dense"
    run: Run


@dataclass
class EvalDetail:
    """What the run files and the report need beyond the results JSON."""

    qrels: dict[str, dict[str, int]]  # the scored queries only
    queries: dict[str, str]
    runs: list[NamedRun] = field(default_factory=list)
    latency_ms: dict[str, list[float]] = field(default_factory=dict)  # mode -> one figure per query


@dataclass
class Series:
    """One set of bars in the metric charts: this run's variants or a baseline, by mode (or external run)."""

    label: str
    metrics: dict[str, dict[str, float]]
    runs: dict[str, Run] = field(default_factory=dict)  # by the same keys; none for a results JSON


def write_run_files(out_dir: Path, detail: EvalDetail) -> dict[str, str]:
    """`<name>.run` per run (`qid Q0 docid rank score tag`) and `qrels.txt` (the judgements as scored: only the
    evaluated queries, negative grades as 0). Returns each run file's name -> where the JSON has its figures."""
    spaced = re.compile(r"\s")
    ids = [*detail.qrels, *(d for r in detail.runs for hits in r.run.values() for d in hits)]
    bad = next((i for i in ids if not i or spaced.search(i)), None)
    if bad is not None:  # the format is whitespace-separated: such an id would shift every column after it
        raise ValueError(f"TREC run files cannot hold the id {bad!r} (empty or with whitespace)")
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for r in detail.runs:
        lines = []
        for qid, hits in r.run.items():
            ranked = sorted(hits.items(), key=lambda h: -h[1])  # the scores are distinct: this is Vela's order
            lines += [f"{qid} Q0 {doc} {rank} {score:g} vela-{r.name}\n" for rank, (doc, score) in enumerate(ranked, 1)]
        (out_dir / f"{r.name}.run").write_text("".join(lines))
        files[f"{r.name}.run"] = r.figure
    qrels = [f"{q} 0 {d} {g}\n" for q, judged in detail.qrels.items() for d, g in judged.items()]
    (out_dir / "qrels.txt").write_text("".join(qrels))
    return files


def check_baseline(path: Path) -> str | None:
    """Why `path` cannot be a baseline (None: it can): a results JSON, a TREC run file or a folder of them."""
    if path.is_dir():
        return None if any(path.glob("*.run")) else f"{path} holds no *.run files"
    if not path.is_file():
        return f"no file or folder {path}"
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            return f"{path} is not readable JSON: {e}"
        ok = isinstance(data, dict) and isinstance(data.get("metrics"), dict)
        return None if ok else f"{path} has no 'metrics' (expected a `vela eval --json` file)"
    return None


def load_baselines(
    paths: Sequence[Path], qrels: Mapping[str, Mapping[str, int]], measures: Mapping[str, Any]
) -> list[Series]:
    """Results JSONs give bars; run files are scored here, on this evaluation's queries and judgements, and
    give bars and per-query scatters. `<mode>-<rest>.run` compares with this run's mode; other names stand alone."""
    series: dict[str, Series] = {}
    for path in paths:
        if path.suffix == ".json" and path.is_file():
            data = json.loads(path.read_text())
            what = f"{data.get('dim', '?')}" + (", no rescore" if data.get("rescore") is False else "")
            _unique(series, Series(f"{path.stem} ({what})", data["metrics"]))
            if isinstance(data.get("baseline"), dict):
                _unique(series, Series(f"{path.stem} ({what}, no rerank)", data["baseline"]))
            continue
        files = sorted(path.glob("*.run")) if path.is_dir() else [path]
        prefix = path.name if path.is_dir() else path.parent.name
        for f in files:
            run: Run = {}
            for d in ir_measures.read_trec_run(str(f)):
                if d.query_id in qrels:
                    run.setdefault(d.query_id, {})[d.doc_id] = float(d.score)
            if not run:
                raise ValueError(f"baseline {f} shares no query with this evaluation")
            mode, _, rest = f.stem.partition("-")
            group, label = (mode, f"{prefix}: {rest}") if mode in MODES and rest else (f.stem, prefix or f.stem)
            found = next((s for s in series.values() if s.label == label and group not in s.runs), None)
            s = found or _unique(series, Series(label, {}))
            s.runs[group] = run
            s.metrics[group] = score_run(qrels, run, measures)
    return list(series.values())


def _unique(series: dict[str, Series], s: Series) -> Series:
    n = 2
    base = s.label
    while s.label in series:
        s.label, n = f"{base} #{n}", n + 1
    series[s.label] = s
    return s


def this_run_series(detail: EvalDetail, measures: Mapping[str, Any]) -> list[Series]:
    """This evaluation's runs as bar series: one per variant (`full`, `full-rerank`, ...), grouped by mode."""
    series: dict[str, Series] = {}
    for r in detail.runs:
        label = "this run: " + r.name.partition("-")[2]
        s = series.setdefault(label, Series(label, {}))
        s.runs[r.mode] = r.run
        s.metrics[r.mode] = score_run(detail.qrels, r.run, measures)
    return list(series.values())


@dataclass(frozen=True)
class Comparison:
    x_label: str
    y_label: str
    x: dict[str, float]  # per-query NDCG@10
    y: dict[str, float]


def comparisons(detail: EvalDetail, baselines: Sequence[Series]) -> list[Comparison]:
    """The scatters: the modes against each other, each mode without rerank against with it, and each
    baseline run against this run's same mode (a run of no mode against this run's best mode)."""
    ndcg = {r.name: per_query_ndcg(detail.qrels, r.run) for r in detail.runs}
    head = {r.mode: r for r in detail.runs if r.figure.startswith("/metrics/")}
    out = []
    order = [m for m in MODES if m in head]
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            out.append(Comparison(head[a].name, head[b].name, ndcg[head[a].name], ndcg[head[b].name]))
    for r in detail.runs:
        if r.figure.startswith("/baseline/") and r.mode in head:
            out.append(Comparison(r.name, head[r.mode].name, ndcg[r.name], ndcg[head[r.mode].name]))
    best = max(head.values(), key=lambda r: sum(ndcg[r.name].values()), default=None)
    for s in baselines:
        for group, run in s.runs.items():
            mine = head.get(group, best)
            if mine is not None:
                x_label = f"{s.label} ({group})" if group in MODES else s.label
                out.append(Comparison(x_label, mine.name, per_query_ndcg(detail.qrels, run), ndcg[mine.name]))
    return out


def write_report(
    out_dir: Path,
    *,
    result: Mapping[str, Any],
    detail: EvalDetail,
    baselines: Sequence[Series],
    measures: Mapping[str, Any],
) -> Path:
    """`out_dir/index.html`, its PNG plots and a copy of the results JSON; returns the HTML's path."""
    from cli import eval_plots  # matplotlib: only a report needs it, and a refused flag should not wait for it

    out_dir.mkdir(parents=True, exist_ok=True)
    series = [*this_run_series(detail, measures), *baselines]
    groups = list(dict.fromkeys(g for s in series for g in s.metrics))
    eval_plots.metric_bars(
        out_dir / "metrics.png", metrics=list(measures), groups=groups, series=[(s.label, s.metrics) for s in series]
    )
    pairs = comparisons(detail, baselines)
    for i, c in enumerate(pairs):
        eval_plots.ndcg_scatter(out_dir / f"ndcg-{i + 1}.png", x=c.x, y=c.y, x_label=c.x_label, y_label=c.y_label)
    if detail.latency_ms:
        eval_plots.latency_plots(out_dir / "latency.png", detail.latency_ms)
    (out_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    page = eval_html.render(
        result=result, series=series, measures=list(measures), pairs=pairs, queries=detail.queries, detail=detail
    )
    (out_dir / "index.html").write_text(page, encoding="utf-8")
    return out_dir / "index.html"
