"""What `vela reindex` says: a failed job in one line, an interrupt with the command that resumes it, bad
arguments (an unknown job, a missing gate split) as exit 2, and one progress bar for a reindex, none for a switch."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from models.registry import ModelRegistry
from tests.tiny_models import save_tiny_bert


@pytest.fixture
def vela(tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    vela = tmp_path / "vela"
    ModelRegistry(vela / "models").register("tiny2", save_tiny_bert(tmp_path / "tiny2"))
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"tides and the moon {i}"}) for i in range(30)))
    ingest = ["ingest", "--data", str(corpus), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]
    assert main([*ingest, "--collection", "c"]) == 0
    capsys.readouterr()
    return vela


def _visible(stderr: str) -> list[str]:
    """The lines a terminal shows: each line's text after its last carriage return, escape codes dropped."""
    lines = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", stderr).split("\n")
    return [line.rsplit("\r", 1)[-1] for line in lines if line.rsplit("\r", 1)[-1].strip()]


def test_a_failed_job_is_one_line_unless_debugging(
    vela: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = ModelRegistry(vela / "models").register("broken", tmp_path / "tiny2")
    assert entry.path is not None
    (entry.path / "model.safetensors").write_bytes(b"not weights")  # damaged once registered: the job fails
    base = ["reindex", "c", "--data-dir", str(vela), "--embedder", "broken"]
    caplog.set_level(logging.INFO)
    assert main(base) == 1
    out, err = capsys.readouterr()
    job = json.loads(out.strip().splitlines()[-1])
    assert job["status"] == "failed"
    assert _visible(err) == [
        f"job {job['job_id']} (reindex c)",
        f"vela reindex: job {job['job_id']} failed: {job['error']}",
    ]
    assert not [r for r in caplog.records if r.exc_info]  # no traceback reached any handler
    monkeypatch.setenv("VELA_DEBUG", "1")
    assert main(base) == 1
    assert [r.getMessage() for r in caplog.records if r.exc_info] == ["job failed"]


def test_an_interrupt_names_the_job_and_its_resume_command(
    vela: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import indexing.reindex

    real = indexing.reindex.vector_reuse

    def interrupted(*_: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(indexing.reindex, "vector_reuse", interrupted)  # Ctrl-C partway through the job
    assert main(["reindex", "c", "--data-dir", str(vela), "--embedder", "tiny2"]) == 130
    err = _visible(capsys.readouterr().err)[-1]
    resume = re.search(r"`(vela reindex c --resume (\w+) --data-dir \S+)`", err)
    assert resume is not None and err.startswith("vela reindex: interrupted; job "), err
    # Failed, not left running with no process to run it (a cancel would have waited on it for ever, and the
    # collection's next reindex or rollback been refused as busy); the command it printed runs it to its end.
    from indexing.jobs import JobStore

    job = JobStore(vela / "jobs.sqlite3").get(resume.group(2))
    assert job.status.value == "failed" and "interrupted" in (job.error or "")
    monkeypatch.setattr(indexing.reindex, "vector_reuse", real)
    assert main(resume.group(1).split()[1:]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["status"] == "succeeded"


def test_a_resume_of_no_such_job_is_a_bad_argument(vela: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from indexing.jobs import JobKind, JobStore

    upsert = JobStore(vela / "jobs.sqlite3").create(collection="c", kind=JobKind.UPSERT, payload=[])
    for job, said in [("nosuchjob", "no job 'nosuchjob'"), (upsert.id, "not a reindex, promote or rollback")]:
        assert main(["reindex", "c", "--data-dir", str(vela), "--resume", job]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("vela reindex: --resume: ") and said in err and "\n" not in err


def test_a_missing_gate_split_is_named_with_the_splits_there_are(
    vela: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = vela / "datasets" / "sfgate"
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "moon"}))
    for split in ("test", "train"):
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    base = ["reindex", "c", "--data-dir", str(vela), "--embedder", "tiny2", "--gate", "sfgate"]
    assert main([*base, "--gate-split", "dev"]) == 2
    said = "vela reindex: --gate-split: dataset 'sfgate' has no split 'dev' (its splits: test, train)"
    assert capsys.readouterr().err.strip() == said
    assert main([*base[:-1], "nosuch"]) == 2
    assert capsys.readouterr().err.strip() == "vela reindex: --gate: no registered dataset of that name"


def test_one_bar_for_a_reindex_and_none_for_a_switch(vela: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["reindex", "c", "--data-dir", str(vela)]
    assert main([*base, "--embedder", "tiny2", "--promote", "manual"]) == 0
    bars = [line for line in _visible(capsys.readouterr().err) if line.startswith("reindex c:")]
    assert len(bars) == 1 and "30/30" in bars[0], bars
    for switch in ("--promote-ready", "--rollback"):
        assert main([*base, switch]) == 0
        err = capsys.readouterr().err
        assert "doc" not in err and len(_visible(err)) == 1, err  # the job's line alone
