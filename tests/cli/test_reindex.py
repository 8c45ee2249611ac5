"""`vela reindex`: a new generation from the command line, recorded as a job; promote, rollback, gate, errors."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from indexing import generations as gens
from indexing.store import CollectionStore
from models.registry import ModelRegistry
from tests.tiny_models import save_tiny_bert


def _job_count(vela: Path) -> int:
    with sqlite3.connect(vela / "jobs.sqlite3") as conn:
        return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])


def _out(capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    return dict(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))


def test_reindex_promote_rollback_and_gate(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vela = tmp_path / "vela"
    registry = ModelRegistry(vela / "models")
    registry.register("tiny2", save_tiny_bert(tmp_path / "tiny2"))
    docs = [{"id": f"d{i}", "text": f"tides and the moon {i} topic{i % 3}"} for i in range(30)]
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in docs))
    ingest = ["ingest", "--data", str(corpus), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]
    assert main([*ingest, "--collection", "c"]) == 0
    capsys.readouterr()
    base = ["reindex", "c", "--data-dir", str(vela)]

    assert main([*base, "--embedder", "tiny2"]) == 0
    out = _out(capsys)
    assert out["status"] == "succeeded" and out["result"]["promoted"] and out["result"]["embedder"] == "tiny2"
    root = vela / "collections" / "c"
    assert gens.generation_of(CollectionStore(vela).get("c")) == 1
    assert main([*base, "--rollback"]) == 0
    assert gens.generation_of(CollectionStore(vela).get("c")) == 0
    capsys.readouterr()

    assert main([*base, "--promote-ready"]) == 2  # nothing waits
    assert "no finished generation" in capsys.readouterr().err
    assert main([*base, "--embedder", "../tiny2"]) == 2
    assert "--embedder: no registered model named '../tiny2' (`vela models list`" in capsys.readouterr().err
    assert main([*base, "--embedder", "tiny2", "--gate", "missing"]) == 2
    capsys.readouterr()
    # The API's bounds, refused before a job is recorded (they failed inside the job, or, for a tolerance of NaN,
    # built a whole generation and then refused a better one).
    jobs_before = _job_count(vela)
    for extra, said in (
        (["--chunk-tokens", "0"], "--chunk-tokens: Input should be greater than or equal to 16"),
        (
            ["--chunk-tokens", "64", "--chunk-overlap", "100"],
            "--chunk-tokens/--chunk-overlap: Value error, chunking.overlap must be at most half",
        ),
        (["--chunk-overlap", "8"], "--chunk-overlap goes with --chunk-tokens"),
        (  # the overlap left out is the serving generation's (32), which does not fit 16 tokens
            ["--chunk-tokens", "16"],
            "--chunk-overlap 32 is more than half of --chunk-tokens 16 (--chunk-overlap is the serving generation's)",
        ),
        (["--gate", "missing", "--gate-tolerance", "nan"], "--gate-tolerance: Input should be a finite number"),
        (["--gate", "missing", "--gate-tolerance", "2"], "--gate-tolerance: Input should be less than or equal to 1"),
    ):
        assert main([*base, "--embedder", "tiny2", *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.startswith("vela reindex: " + said) and "\n" not in err, err
    assert _job_count(vela) == jobs_before

    # Manual: built, then promoted on its own command.
    assert main([*base, "--embedder", "tiny2", "--promote", "manual"]) == 0
    assert _out(capsys)["result"]["promoted"] is False
    assert gens.read_pointer(root).ready
    assert main([*base, "--promote-ready"]) == 0
    assert gens.generation_of(CollectionStore(vela).get("c")) == gens.read_pointer(root).current != 0
    capsys.readouterr()

    # A registered judged set: bm25 reads the same texts in both generations, so the gate passes with equal figures.
    folder = vela / "datasets" / "judged"
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "moon topic1"}))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert main([*base, "--embedder", "tiny2", "--gate", "judged", "--gate-mode", "bm25"]) == 0
    gate = _out(capsys)["result"]["gate"]
    assert gate["passed"] and gate["old"] == gate["new"] > 0
    assert len(gens.on_disk(root)) == 2


def test_the_job_it_runs_is_leased_and_renewed(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Killed outright, `vela reindex` leaves a job whose lease lapses: a server or worker takes it over then.
    import indexing.ingest as ingest

    vela = tmp_path / "vela"
    ModelRegistry(vela / "models").register("tiny2", save_tiny_bert(tmp_path / "tiny2"))
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"tides {i}"}) for i in range(5)))
    ingest_args = ["ingest", "--data", str(corpus), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]
    assert main([*ingest_args, "--collection", "c"]) == 0
    monkeypatch.setenv("VELA_CLAIM_IDLE_S", "30")
    real = ingest.run_job
    leases: list[tuple[str | None, float | None]] = []  # the job's row as it runs

    def watched(**kw: Any) -> Any:
        on_progress = kw["on_progress"]

        def progress(done: int, total: int) -> None:
            with sqlite3.connect(vela / "jobs.sqlite3") as conn:
                row = conn.execute("SELECT lease_owner, lease_until FROM jobs WHERE id = ?", (kw["job_id"],))
                leases.append(row.fetchone())
            on_progress(done, total)

        return real(**{**kw, "on_progress": progress})

    monkeypatch.setattr(ingest, "run_job", watched)
    capsys.readouterr()
    assert main(["reindex", "c", "--data-dir", str(vela), "--embedder", "tiny2"]) == 0
    assert _out(capsys)["status"] == "succeeded"
    assert leases and all(owner is not None and until is not None for owner, until in leases)


def test_resume_refuses_a_job_another_live_process_runs(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from indexing.jobs import JobKind, JobStatus, JobStore

    vela = tmp_path / "vela"
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"tides {i}"}) for i in range(3)))
    ingest_args = ["ingest", "--data", str(corpus), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]
    assert main([*ingest_args, "--collection", "c"]) == 0
    other = JobStore(vela / "jobs.sqlite3", lease_s=600)  # a server or worker that took the job over, alive
    job = other.create(collection="c", kind=JobKind.REINDEX, payload=[{}], running_in="w1")
    assert other.start(job.id, "w1") is not None
    capsys.readouterr()
    assert main(["reindex", "c", "--data-dir", str(vela), "--resume", job.id]) == 3
    err = capsys.readouterr().err
    assert f"job {job.id} is running in w1" in err and f"GET /jobs/{job.id}" in err
    assert other.get(job.id).status == JobStatus.RUNNING and other.get(job.id).attempts == 1
