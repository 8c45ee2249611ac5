"""What `vela eval` refuses before it ingests, beside tests/cli/test_eval_inputs.py: a split with no judged query
to score, a baseline scored on other queries of the same dataset, a --dim wider than the embedder's vectors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli.eval_data import other_queries, query_set
from cli.main import main
from tests.cli.beir_data import write_beir
from tests.cli.test_eval_inputs import _refused


@pytest.mark.parametrize(
    ("qrels", "said"),
    [
        ("query-id\tcorpus-id\tscore\n", "qrels/test.tsv judges no query: nothing to score"),
        ("query-id\tcorpus-id\tscore\nq8\td0\t1\nq9\td1\t1\n", "judges 2 queries, none of them in queries.jsonl"),
    ],
)
def test_a_split_with_no_query_to_score_is_refused_before_the_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], qrels: str, said: str
) -> None:
    """Else the whole corpus is ingested for a table of NaN, and the JSON holds a bare NaN (not JSON)."""
    data = write_beir(tmp_path / "mini")
    (data / "qrels" / "test.tsv").write_text(qrels)
    out = tmp_path / "out.json"
    err = _refused(["--data", str(data), "--json", str(out)], tmp_path / "work", capsys)
    assert err.strip() == f"vela eval: --split: {data}/{said}" or said in err, err
    assert not out.exists()


def test_a_baseline_scored_on_other_queries_is_refused(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_beir(tmp_path / "mini")
    full = tmp_path / "full.json"
    flags = ["--data", str(data), "--embedder", str(tiny_embedder_dir), "--modes", "bm25"]
    assert main(["eval", *flags, "--json", str(full), "--workdir", str(tmp_path / "w1")]) == 0
    result = json.loads(full.read_text())
    assert result["queries"] == 2 and result["query_set"] == query_set(["q1", "q0"])  # the order does not count
    ids = tmp_path / "ids.txt"
    ids.write_text("q0\n")
    capsys.readouterr()
    report = ["--report", str(tmp_path / "rep"), "--query-ids", str(ids)]
    err = _refused([*flags, "--baseline", str(full), *report], tmp_path / "w2", capsys)
    assert err.strip() == (
        f"vela eval: --baseline: {full} scored 2 queries (all of them), this evaluation 1 (--query-ids {ids}): "
        "its figures are not comparable"
    )
    # A file of an older version (no query_set) is told apart by its count where it can be.
    older = tmp_path / "older.json"
    older.write_text(json.dumps({k: v for k, v in result.items() if k != "query_set"}))
    assert "scored 2 queries" in _refused([*flags, "--baseline", str(older), *report], tmp_path / "w2", capsys)
    assert other_queries(full, ["q0", "q1"], None) is None and other_queries(older, ["q0", "q1"], None) is None
    # Another subset of the same size is another set all the same.
    subset = tmp_path / "subset.json"
    subset.write_text(json.dumps({**result, "queries": 1, "query_set": query_set(["q1"]), "query_ids": "a.txt"}))
    assert "scored 1 queries (--query-ids a.txt)" in (other_queries(subset, ["q0"], ids) or "")


def test_a_dim_wider_than_the_embedder_is_refused(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tiny model makes 32-d vectors: a "256-d" index of them is the full vectors, reported as dim 256."""
    data = write_beir(tmp_path / "mini")
    argv = ["--data", str(data), "--embedder", str(tiny_embedder_dir), "--dim", "256"]
    err = _refused(argv, tmp_path / "work", capsys)
    assert (
        err.strip() == f"vela eval: --dim 256: embedder {str(tiny_embedder_dir)!r} makes 32-d vectors: use --dim full"
    )


def test_a_refused_flag_is_answered_before_the_heavy_imports() -> None:
    """A mistyped flag gets its one line at once: neither torch (the models) nor matplotlib (the report) is
    imported first. A fresh interpreter, since this one has both loaded already."""
    code = (
        "import sys; from cli.main import main; rc = main(['eval', '--data', '/nonexistent-dataset']); "
        "print(rc, 'torch' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["2", "False", "False"], out.stdout + out.stderr
    assert "vela eval: --data: no folder /nonexistent-dataset" in out.stderr
