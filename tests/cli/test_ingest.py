"""`vela ingest` without Ray: a JSONL file into a new sharded collection, recorded as a job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from indexing.jobs import JobStore
from indexing.store import CollectionStore
from tests.cli.beir_data import write_beir
from tests.cli.ctrl_c import ctrl_c_handled
from tests.reranker_fixtures import make_reranker


def test_ingest_jsonl_into_a_sharded_collection(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "docs.jsonl"
    docs = [{"id": f"d{i}", "title": f"t{i}", "text": f"text {i} about tides", "metadata": {"i": i}} for i in range(25)]
    data.write_text("\n".join(json.dumps(d) for d in docs))
    vela = tmp_path / "vela"
    base = ["ingest", "--data", str(data), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]
    assert main([*base, "--collection", "notes", "--shards", "2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "succeeded" and printed["stats"]["shards"] == 2
    assert printed["stats"]["embedder"] == str(tiny_embedder_dir.resolve())  # a folder given: shown as that folder
    job = JobStore(vela / "jobs.sqlite3").get(printed["job_id"])
    assert (job.status, job.done, job.total) == ("succeeded", 25, 25)
    coll = CollectionStore(vela).get("notes")
    assert coll.settings.shards == 2 and coll.stats()["documents"] == 25
    # --ray needs a sharded collection: an unsharded one is refused before anything is queued.
    assert main([*base, "--collection", "flat", "--ray", "127.0.0.1:1"]) == 2
    assert "--ray needs a sharded collection" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (['{"text": "no id here"}', '{"_id": "k", "text": "keyed"}'], "docs.jsonl:1: the document has no id"),
        (['{"id": "a", "text": "   "}'], "docs.jsonl:1 (id 'a'): text: Value error, document text must not be empty"),
        (['{"id": "a", "text": "x"}', '{"id": "a", "text": "y"}'], "id 'a' is given twice (documents 1 and 2)"),
        (['{"id": "a", "text": "x"}', '{"id": "b", "text": '], "docs.jsonl:2: not a JSON line"),
        (['["a", "x"]'], "docs.jsonl:1: a document is a JSON object, got list"),
        (['{"id": "a"}'], "docs.jsonl:1 (id 'a'): text: Field required"),
        (['{"id": "a", "text": "x", "metadata": {"v": NaN}}'], "metadata must not contain NaN or Infinity"),
    ],
)
def test_a_bad_document_is_refused_before_anything_is_written(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], lines: list[str], needle: str
) -> None:
    data = tmp_path / "docs.jsonl"
    data.write_text("\n".join(lines) + "\n")
    vela = tmp_path / "vela"
    args = ["ingest", "--data", str(data), "--data-dir", str(vela), "--collection", "c"]
    assert main([*args, "--embedder", str(tiny_embedder_dir)]) == 2
    assert needle in capsys.readouterr().err
    assert not (vela / "collections").exists()  # no collection made, no job recorded


@pytest.mark.parametrize(
    ("data", "needle"),
    [("missing.jsonl", "no file or folder"), (".", "is a folder without corpus.jsonl")],
)
def test_a_bad_data_path_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: str, needle: str
) -> None:
    assert main(["ingest", "--data", str(tmp_path / data), "--data-dir", str(tmp_path / "v"), "--collection", "c"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def _interrupt_during_the_first_batch(monkeypatch: pytest.MonkeyPatch, signals: int) -> None:
    """Ctrl-C (`signals` times) while the job's first batch is being encoded. A second Ctrl-C ends the process:
    tests/cli/test_ingest_ctrl_c.py presses it in a subprocess."""
    import indexing.ingest

    real = indexing.ingest.prepare_documents
    calls = []

    def prepare(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            for _ in range(signals):
                ctrl_c_handled()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(indexing.ingest, "prepare_documents", prepare)
    monkeypatch.setenv("VELA_INGEST_BATCH_SIZE", "5")


def _twenty(tmp_path: Path, tiny_embedder_dir: Path) -> list[str]:
    data = tmp_path / "docs.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"text {i} about tides"}) for i in range(20)))
    vela = tmp_path / "vela"
    return ["ingest", "--data", str(data), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]


def test_ctrl_c_stops_after_the_batch_and_what_is_stored_is_searchable(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*_twenty(tmp_path, tiny_embedder_dir), "--collection", "c"]
    _interrupt_during_the_first_batch(monkeypatch, signals=1)
    assert main(args) == 130
    out, err = capsys.readouterr()
    assert "stopped at 5 of 20 documents" in err
    printed = json.loads(out)
    job = JobStore(tmp_path / "vela" / "jobs.sqlite3").get(printed["job_id"])
    assert (job.status, job.done) == ("cancelled", 5)
    stats = CollectionStore(tmp_path / "vela").get("c").stats()
    assert stats["documents"] == 5 and stats["index"]["passages"] == stats["passages"] > 0  # published: searchable
    monkeypatch.undo()
    assert main(args) == 0  # the same command again stores the rest
    assert CollectionStore(tmp_path / "vela").get("c").stats()["documents"] == 20


@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        ("duplicate", "id 'd1' is given twice (documents 2 and 9)"),
        ("array", "corpus.jsonl:9: a document is a JSON object, got list"),
        ("latin-1", "corpus.jsonl:9: not UTF-8 text"),
        ("no id", "corpus.jsonl:9: the document has no id"),
    ],
)
def test_a_faulty_beir_corpus_is_refused_naming_the_line(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], fault: str, needle: str
) -> None:
    data = write_beir(tmp_path / "mini")
    extra = {
        "duplicate": json.dumps({"_id": "d1", "text": "again"}).encode(),
        "array": b"[1, 2]",
        "latin-1": '{"_id": "x", "text": "caf\xe9"}'.encode("latin-1"),
        "no id": b'{"text": "no id"}',
    }[fault]
    (data / "corpus.jsonl").write_bytes((data / "corpus.jsonl").read_bytes() + extra + b"\n")
    vela = tmp_path / "vela"
    args = ["ingest", "--data", str(data), "--data-dir", str(vela), "--collection", "c"]
    assert main([*args, "--embedder", str(tiny_embedder_dir)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not vela.exists()


def test_a_reranker_is_refused_as_the_embedder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, reranker = write_beir(tmp_path / "mini"), make_reranker("bert", tmp_path / "rr")
    capsys.readouterr()  # the fixture's own progress bars
    vela = tmp_path / "vela"
    args = ["ingest", "--data", str(data), "--data-dir", str(vela), "--collection", "c", "--embedder", str(reranker)]
    assert main(args) == 2
    assert capsys.readouterr().err == (f"vela ingest: --embedder: '{reranker}' is a reranker, not an embedder\n")
    assert not vela.exists()  # no collection whose embedder is a reranker


def test_a_bad_collection_name_or_shape_is_one_line_and_status_2(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _twenty(tmp_path, tiny_embedder_dir)
    assert main([*args, "--collection", "bad name!"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vela ingest: ") and "Traceback" not in err and "ValueError" not in err
    assert main([*args, "--collection", "c", "--shards", "2"]) == 0
    capsys.readouterr()
    assert main([*args, "--collection", "c", "--shards", "3"]) == 2
    (said,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vela ingest: ")]
    assert "2 shard" in said


def test_the_default_model_is_shown_by_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not as the packaged folder inside the Python environment, which another install has elsewhere."""
    data = tmp_path / "docs.jsonl"
    data.write_text(json.dumps({"id": "d", "text": "tides and the moon"}))
    assert main(["ingest", "--data", str(data), "--data-dir", str(tmp_path / "vela"), "--collection", "c"]) == 0
    assert json.loads(capsys.readouterr().out)["stats"]["embedder"] == "default"
