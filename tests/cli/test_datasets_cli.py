"""`vela datasets add|list|remove`: the judged sets a gated reindex names, registered from a BEIR folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main as vela
from indexing.gate import judged_set


def _beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(3))
    )
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td1\t1\nq1\td2\t2\n")
    (root / "corpus.jsonl").write_text("not read\n")
    return root


def test_add_list_use_and_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("VELA_DATA_DIR", str(data))
    src = _beir(tmp_path / "src")
    assert vela(["datasets", "add", "small", str(src)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "name": "small",
        "splits": ["test"],
        "queries": 3,
        "judged": {"test": 2},
    }
    assert sorted(p.name for p in (data / "datasets" / "small").rglob("*")) == ["qrels", "queries.jsonl", "test.tsv"]
    judged = judged_set(data, {"dataset": "small"})  # what a gate reads
    assert judged.queries == {"q0": "query 0", "q1": "query 1"} and judged.qrels["q1"] == {"d2": 2}

    assert vela(["datasets", "add", "small", str(src)]) == 2  # taken
    assert vela(["datasets", "add", "../up", str(src)]) == 2
    assert vela(["datasets", "add", "empty", str(tmp_path)]) == 2  # no queries.jsonl: not a BEIR folder
    assert "not a BEIR folder" in capsys.readouterr().err
    assert sorted(p.name for p in (data / "datasets").iterdir()) == ["small"]  # nothing half-made left

    assert vela(["datasets", "list"]) == 0
    assert [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()] == ["small"]
    assert vela(["datasets", "remove", "small"]) == 0
    assert vela(["datasets", "remove", "small"]) == 2
    assert not (data / "datasets" / "small").exists()


def test_data_dir_goes_before_or_after_the_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, src = tmp_path / "data", _beir(tmp_path / "src")
    assert vela(["datasets", "add", "after", str(src), "--data-dir", str(data)]) == 0
    assert vela(["datasets", "--data-dir", str(data), "add", "before", str(src)]) == 0
    capsys.readouterr()
    for args in (["datasets", "--data-dir", str(data), "list"], ["datasets", "list", "--data-dir", str(data)]):
        assert vela(args) == 0
        assert sorted(json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()) == ["after", "before"]
    for args in (
        ["fusion", "--data-dir", str(data), "show", "nope"],
        ["fusion", "show", "nope", "--data-dir", str(data)],
    ):
        assert vela(args) == 2 and "no collection named 'nope'" in capsys.readouterr().err
