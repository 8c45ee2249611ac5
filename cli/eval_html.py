"""The page of `vela eval --report`: index.html around the plots that cli.eval_report wrote beside it.

Plain HTML with inline CSS (the report is a folder to open or to publish as it is, with no assets to fetch)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from cli.eval_report import Comparison, EvalDetail, Series

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 76em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.92em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.7em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; }
.pairs { display: flex; flex-wrap: wrap; gap: 1.5em; }
.pair { flex: 0 1 30em; }
code { background: #f3f3f3; padding: 0 0.25em; }
"""
TOP_QUERIES = 5  # per scatter: the queries it wins and loses most on


def render(
    *,
    result: Mapping[str, Any],
    series: Sequence[Series],
    measures: Sequence[str],
    pairs: Sequence[Comparison],
    queries: Mapping[str, str],
    detail: EvalDetail,
) -> str:
    title = f"vela eval: {result['dataset']}"
    parts = [
        f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>",
        f"<style>{STYLE}</style></head><body>\n<h1>{escape(title)}</h1>",
        _summary(result),
        "<h2>Metrics</h2>",
        "<p>Each group is a retrieval mode (or a baseline run of no mode); each bar a run of this evaluation or a "
        "baseline. Baseline run files are scored here, on the same queries and judgements; a results JSON "
        "shows the figures it holds.</p>",
        "<img src='metrics.png' alt='metrics per mode, with the baselines'>",
        _metrics_table(series, measures),
    ]
    if pairs:
        parts += [
            "<h2>Per-query NDCG@10</h2>",
            "<p>Each point is a query (a larger point: several queries at the same place). Above the diagonal the "
            "run on the vertical axis does better on that query, below it worse.</p><div class='pairs'>",
            *(_pair(i, c, queries) for i, c in enumerate(pairs)),
            "</div>",
        ]
    if detail.latency_ms:
        parts += [
            "<h2>Latency</h2>",
            "<p>Each query searched alone, in this process (no HTTP), for the same depth as the metrics "
            "(rerank included when it ran), after one warm-up query per mode.</p>",
            "<img src='latency.png' alt='latency histogram and CDF'>",
            _latency_table(detail.latency_ms),
        ]
    if result.get("run_files"):
        parts += ["<h2>Run files</h2>", _run_files(result)]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _ran(result: Mapping[str, Any]) -> str:
    """How the embedder ran: its backend and precision ("onnx, int8"), as the results JSON records them, and the
    documents' graph's precision where it differs."""
    ran = ", ".join(str(result[k]) for k in ("backend", "precision") if result.get(k))
    documents = result.get("document_precision")
    return f"{ran}; documents {documents}" if documents else ran


def _summary(result: Mapping[str, Any]) -> str:
    rerank = result.get("rerank") or {}
    rows = [
        ("dataset", f"{result['dataset']} (split {result['split']})"),
        ("queries", result["queries"]),
        ("documents / passages", f"{result['documents']} / {result['passages']}"),
        ("embedder", f"{result['embedder']} ({_ran(result)})"),
        ("dense index", f"dim {result['dim']}" + (", no rescore" if result.get("rescore") is False else "")),
        *([("rerank", f"{rerank['model']}, top {rerank['top_n']}, weight {rerank['weight']}")] if rerank else []),
        ("seconds", f"{result['seconds']} (ingest {result['ingest_seconds']})"),
        *([("command", f"<code>{escape(str(result['command']))}</code>")] if result.get("command") else []),
    ]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{v if k == 'command' else escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _metrics_table(series: Sequence[Series], measures: Sequence[str]) -> str:
    head = "<tr><th>run</th><th>group</th>" + "".join(f"<th>{escape(m)}</th>" for m in measures) + "</tr>"
    rows = []
    for s in series:
        for group, m in s.metrics.items():
            cells = "".join(f"<td class='n'>{_num(m.get(name))}</td>" for name in measures)
            rows.append(f"<tr><td>{escape(s.label)}</td><td>{escape(group)}</td>{cells}</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _pair(i: int, c: Comparison, queries: Mapping[str, str]) -> str:
    delta = sorted(c.x, key=lambda q: (c.y[q] - c.x[q], q))  # the worst losses first, ties by query id
    wins = [q for q in reversed(delta) if c.y[q] > c.x[q]][:TOP_QUERIES]
    losses = [q for q in delta if c.y[q] < c.x[q]][:TOP_QUERIES]
    head = f"<tr><th>query</th><th>{escape(c.x_label)}</th><th>{escape(c.y_label)}</th></tr>"

    def rows(qids: list[str]) -> str:
        return "".join(
            f"<tr><td>{escape(q)}: {escape(_cut(queries.get(q, '')))}</td>"
            f"<td class='n'>{c.x[q]:.3f}</td><td class='n'>{c.y[q]:.3f}</td></tr>"
            for q in qids
        )

    return (
        f"<div class='pair'><h3>{escape(c.y_label)} vs {escape(c.x_label)}</h3>"
        f"<img src='ndcg-{i + 1}.png' alt='per-query NDCG@10, {escape(c.y_label)} vs {escape(c.x_label)}'>"
        f"<details><summary>queries it gains and loses most on</summary>"
        f"<p>Gains</p><table>{head}{rows(wins)}</table><p>Losses</p><table>{head}{rows(losses)}</table>"
        "</details></div>"
    )


def _latency_table(latency_ms: Mapping[str, Sequence[float]]) -> str:
    head = "<tr><th>mode</th><th>queries</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>mean ms</th></tr>"
    rows = []
    for mode, values in latency_ms.items():
        v = np.asarray(values, dtype=float)
        stats = [*np.percentile(v, [50, 90, 99]), v.mean()]
        cells = "".join(f"<td class='n'>{x:.1f}</td>" for x in stats)
        rows.append(f"<tr><td>{escape(mode)}</td><td class='n'>{v.size}</td>{cells}</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _run_files(result: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td><code>{escape(name)}</code></td><td><code>{escape(figure)}</code></td></tr>"
        for name, figure in result["run_files"].items()
    )
    return (
        f"<p>In <code>{escape(str(result.get('run_dir', '')))}</code>, with <code>qrels.txt</code> (the judgements "
        "as scored). Each reproduces the figures at the given place of the results JSON.</p>"
        f"<table><tr><th>file</th><th>figures in the JSON</th></tr>{rows}</table>"
    )


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def _cut(text: str, n: int = 140) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
