"""What `vela eval` refuses before it creates anything: a faulty dataset, an unusable flag, a reranker for an
embedder, a baseline from another dataset. Each is one line on stderr, status 2, and no workdir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from tests.cli.beir_data import read_docs, write_beir, write_corpus
from tests.reranker_fixtures import make_reranker


def _refused(argv: list[str], work: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["eval", *argv, "--workdir", str(work)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vela eval: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert not work.exists()  # nothing ingested, no collection left behind
    return err


@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        ("duplicate", "corpus.jsonl: id 'd1' is given twice (documents 2 and 9)"),
        ("empty", "corpus.jsonl holds no documents"),
        ("array", "corpus.jsonl:9: a document is a JSON object, got list"),
        ("no header", "test.tsv:1: the header line must name the columns query-id, corpus-id, score"),
    ],
)
def test_a_faulty_dataset_is_refused_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str, needle: str
) -> None:
    data = write_beir(tmp_path / "mini")
    docs = read_docs(data)
    if fault == "duplicate":
        write_corpus(data, [*docs, {**docs[1], "text": "another text"}])
    elif fault == "empty":
        (data / "corpus.jsonl").write_text("\n")
    elif fault == "array":
        (data / "corpus.jsonl").write_text((data / "corpus.jsonl").read_text() + "[1, 2]\n")
    else:
        qrels = data / "qrels" / "test.tsv"
        qrels.write_text(qrels.read_text().split("\n", 1)[1])
    assert needle in _refused(["--data", str(data)], tmp_path / "work", capsys)


def test_flags_are_refused_with_the_command_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, work = write_beir(tmp_path / "mini"), tmp_path / "work"
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"dataset": "nfcorpus", "split": "test", "metrics": {}}))
    cases = [
        (["--json", str(tmp_path)], f"--json: {tmp_path} is a folder"),
        (["--modes", "bm25,sparse"], "--modes: unknown ['sparse']"),
        (["--query-ids", str(tmp_path / "none.txt")], "--query-ids: no file"),
        (["--baseline", str(other)], "--baseline: only the report"),
        (["--baseline", str(other), "--report", str(tmp_path / "rep")], "scored dataset 'nfcorpus' (split 'test')"),
    ]
    for flags, needle in cases:
        assert needle in _refused(["--data", str(data), *flags], work, capsys), flags
    ids = tmp_path / "ids.txt"
    ids.write_text("q7\n")
    assert "--query-ids: none of the ids" in _refused(["--data", str(data), "--query-ids", str(ids)], work, capsys)


def test_a_reranker_is_refused_as_the_embedder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, reranker = write_beir(tmp_path / "mini"), make_reranker("bert", tmp_path / "rr")
    capsys.readouterr()  # the fixture's own progress bars
    err = _refused(["--data", str(data), "--embedder", str(reranker)], tmp_path / "work", capsys)
    assert f"--embedder: '{reranker}' is a reranker, not an embedder" in err
