"""`vela eval --run-dir / --report / --baseline` on a tiny BEIR folder with a tiny random embedder: the run files
reproduce Vela's own figures in ir-measures, and the report's page and plots are written."""

from __future__ import annotations

import json
from functools import reduce
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import ir_measures
import pytest

from cli.main import main
from tests.reranker_fixtures import make_reranker

TOPICS = ["insulin", "graphene", "tides", "appeals", "volcano", "enzymes", "comets", "glaciers"]
MEASURES = {"ndcg@10": ir_measures.nDCG @ 10, "recall@100": ir_measures.R @ 100, "mrr@10": ir_measures.RR @ 10}


def _tiny_beir(root: Path) -> Path:
    """8 topics of 4 documents, and two identical documents: BM25 and dense scores tie on them, so a run file
    whose order hung on how a tool breaks ties would score differently from Vela."""
    docs = [
        {"_id": f"d{t}-{i}", "title": f"{topic} note {i}", "text": f"A {topic} study, part {i}, on {topic} samples."}
        for t, topic in enumerate(TOPICS)
        for i in range(4)
    ]
    twin = {"title": "twin report", "text": "The twin report about insulin and comets."}
    docs += [{"_id": "twin-a", **twin}, {"_id": "twin-b", **twin}]
    queries = [{"_id": f"q{t}", "text": f"{topic} samples"} for t, topic in enumerate(TOPICS)]
    queries.append({"_id": "qtwin", "text": "twin report"})
    qrels = [(f"q{t}", f"d{t}-{i}", 2 if i == 0 else 1) for t in range(len(TOPICS)) for i in range(4)]
    qrels.append(("qtwin", "twin-a", 1))  # one of two tied documents: the tie's order decides the figure
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    rows = "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return root


def _qrels(root: Path) -> dict[str, dict[str, int]]:
    """The judgements straight from the BEIR file, not through Vela's reader."""
    out: dict[str, dict[str, int]] = {}
    for line in (root / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        out.setdefault(q, {})[d] = int(g)
    return out


def _check_run_files(result: dict[str, Any], qrels: dict[str, dict[str, int]]) -> None:
    """Each run file: TREC columns, ranks 1..n (n at most 100), scores strictly decreasing, and ir-measures on it
    gives the figures the JSON holds for it (to 1e-4, the JSON's rounding)."""
    run_dir = Path(result["run_dir"])
    assert result["run_files"]
    for name, pointer in result["run_files"].items():
        lines = [line.split() for line in (run_dir / name).read_text().splitlines()]
        assert lines and all(len(cols) == 6 and cols[1] == "Q0" for cols in lines)
        by_query: dict[str, list[tuple[int, float]]] = {}
        for qid, _, _, rank, score, tag in lines:
            by_query.setdefault(qid, []).append((int(rank), float(score)))
            assert tag == f"vela-{name.removesuffix('.run')}"
        for ranked in by_query.values():
            assert [r for r, _ in ranked] == list(range(1, len(ranked) + 1)) and len(ranked) <= 100
            assert all(a[1] > b[1] for a, b in zip(ranked, ranked[1:], strict=False))
        figures = reduce(lambda node, key: node[key], pointer.strip("/").split("/"), result)
        agg = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, ir_measures.read_trec_run(str(run_dir / name)))
        for metric, measure in MEASURES.items():
            assert abs(agg[measure] - figures[metric]) <= 1e-4, (name, metric, agg[measure], figures[metric])
    # The judgements as scored, next to the runs, are the dataset's own.
    written = ir_measures.read_trec_qrels(str(run_dir / "qrels.txt"))
    assert {(q.query_id, q.doc_id, q.relevance) for q in written} == {
        (q, d, g) for q, judged in qrels.items() for d, g in judged.items()
    }


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.sources += [v for k, v in attrs if k == "src" and v]


def _check_report(report: Path) -> tuple[str, list[str]]:
    page = (report / "index.html").read_text()
    parser = _Images()
    parser.feed(page)
    for src in parser.sources:
        assert (report / src).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", src
    return page, parser.sources


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> dict[str, Any]:
    """One plain evaluation of the three modes, with run files and a report (the later tests' baseline)."""
    tmp = tmp_path_factory.mktemp("eval-report")
    data = _tiny_beir(tmp / "tiny")
    argv = ["eval", "--data", str(data), "--embedder", str(tiny_embedder_dir), "--workdir", str(tmp / "work")]
    out = {
        "tmp": tmp,
        "data": data,
        "argv": argv,
        "json": tmp / "first.json",
        "runs": tmp / "runs",
        "report": tmp / "r",
    }
    code = main([*argv, "--json", str(out["json"]), "--run-dir", str(out["runs"]), "--report", str(out["report"])])
    assert code == 0
    return out


def test_run_files_reproduce_the_json_figures(first: dict[str, Any]) -> None:
    result = json.loads(first["json"].read_text())
    assert result["run_files"] == {f"{m}-full.run": f"/metrics/{m}" for m in ("bm25", "dense", "hybrid")}
    _check_run_files(result, _qrels(first["data"]))


def test_report_has_the_metric_bars_scatters_and_latency(first: dict[str, Any]) -> None:
    page, sources = _check_report(first["report"])
    assert sources == ["metrics.png", "ndcg-1.png", "ndcg-2.png", "ndcg-3.png", "latency.png"]
    assert "dense-full vs bm25-full" in page and "hybrid-full vs dense-full" in page
    result = json.loads((first["report"] / "results.json").read_text())
    assert set(result["latency_ms"]) == {"bm25", "dense", "hybrid"}
    assert f"({result['backend']}, {result['precision']}" in page  # how the embedder ran: backend and precision
    assert all(0 < v["p50"] <= v["p99"] for v in result["latency_ms"].values())


def test_rerank_runs_and_baselines(first: dict[str, Any], tmp_path: Path) -> None:
    """With rerank every variant gets its run file; an earlier JSON and run folder show up as baselines."""
    reranker = make_reranker("bert", tmp_path / "rr")
    runs, report, out = tmp_path / "runs", tmp_path / "report", tmp_path / "second.json"
    argv = [*first["argv"], "--modes", "bm25,hybrid", "--rerank", str(reranker), "--rerank-top-n", "10"]
    argv += ["--rerank-weight", "1,0", "--json", str(out), "--run-dir", str(runs), "--report", str(report)]
    assert main([*argv, "--baseline", str(first["json"]), "--baseline", str(first["runs"])]) == 0
    result = json.loads(out.read_text())
    assert result["run_files"] == {
        f"{m}-full{variant}.run": pointer.format(m=m)
        for m in ("bm25", "hybrid")
        for variant, pointer in [
            ("", "/baseline/{m}"),
            ("-rerank", "/metrics/{m}"),
            ("-rerank-w0", "/rerank/metrics_by_weight/0/{m}"),
        ]
    }
    _check_run_files(result, _qrels(first["data"]))
    page, sources = _check_report(report)
    # hybrid vs bm25, each mode's rerank vs its fused run, and the 3 baseline runs: 6 scatters.
    assert [s for s in sources if s.startswith("ndcg-")] == [f"ndcg-{i}.png" for i in range(1, 7)]
    assert "first (full)" in page and "runs: full" in page
    assert "hybrid-full-rerank vs hybrid-full" in page


def test_bad_baselines_are_refused_before_evaluating(first: dict[str, Any], tmp_path: Path) -> None:
    assert main([*first["argv"], "--baseline", str(first["json"])]) == 2  # no --report to show it in
    report = ["--report", str(tmp_path / "r")]
    assert main([*first["argv"], *report, "--baseline", str(tmp_path / "missing.run")]) == 2
    (tmp_path / "bad.json").write_text('{"dataset": "x"}')
    assert main([*first["argv"], *report, "--baseline", str(tmp_path / "bad.json")]) == 2
    assert not (tmp_path / "r").exists()
