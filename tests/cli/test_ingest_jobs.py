"""`vela ingest` of a corpus larger than one job: consecutive jobs of bounded size (--job-docs, --job-bytes), one
progress bar, Ctrl-C between and inside jobs, and a job store that refuses a job. The bounds are lowered so that
a few documents make several jobs."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from indexing.jobs import JobKind, JobStore
from indexing.store import CollectionStore
from tests.cli.ctrl_c import ctrl_c_handled
from tests.cli.test_reindex_console import _visible


def _corpus(tmp_path: Path, tiny_embedder_dir: Path, n: int = 25, long_text_at: int | None = None) -> list[str]:
    """`vela ingest` arguments for n same-sized documents d0.. (d<long_text_at> with a 3,000-character text)."""
    docs = [{"id": f"d{i:02d}", "text": f"text {i:02d} about tides and the moon"} for i in range(n)]
    if long_text_at is not None:
        docs[long_text_at]["text"] = "tides " * 500
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    return _args(tmp_path, tiny_embedder_dir)


def _args(tmp_path: Path, tiny_embedder_dir: Path) -> list[str]:
    """`vela ingest` of tmp_path/docs.jsonl into tmp_path/vela."""
    data, vela = tmp_path / "docs.jsonl", tmp_path / "vela"
    return ["ingest", "--data", str(data), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]


FINISHING = "finishing merges and the fusion choice"  # said before the wait for the background work


def _job_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("job ")]


def _jobs(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "vela" / "jobs.sqlite3")


def _upserts(tmp_path: Path) -> int:
    return len(_jobs(tmp_path).listing(kinds=frozenset({JobKind.UPSERT})))


def test_the_corpus_runs_as_jobs_of_at_most_job_docs_under_one_bar(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*_corpus(tmp_path, tiny_embedder_dir), "--collection", "c", "--job-docs", "10"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    printed = json.loads(out)
    lines = _job_lines(err)
    assert [line.split(": ", 1)[1] for line in lines] == [
        f"documents {a} to {b} of 25 into 'c'" for a, b in ((1, 10), (11, 20), (21, 25))
    ]
    ids = [line.split()[1].rstrip(":") for line in lines]  # named as each starts, in the order they ran
    assert printed["job_ids"] == ids and printed["job_id"] == ids[-1]
    assert (printed["status"], printed["done"], printed["total"]) == ("succeeded", 25, 25)
    jobs = [_jobs(tmp_path).get(i) for i in ids]
    assert [(j.status, j.done, j.total) for j in jobs] == [("succeeded", 10, 10)] * 2 + [("succeeded", 5, 5)]
    assert CollectionStore(tmp_path / "vela").get("c").stats()["documents"] == 25
    # One bar over the corpus, not one per job, that the job lines printed as jobs start do not tear.
    bars = [line for line in _visible(err) if line.startswith("ingest c:")]
    assert len(bars) == 1 and "25/25" in bars[0], _visible(err)


def test_max_docs_counts_across_jobs(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*_corpus(tmp_path, tiny_embedder_dir), "--collection", "c", "--job-docs", "5", "--max-docs", "12"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [_jobs(tmp_path).get(i).total for i in printed["job_ids"]] == [5, 5, 2]
    assert CollectionStore(tmp_path / "vela").get("c").stats()["documents"] == 12


def _refuse_job_values_over(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    """The job store's SQLite refuses any text over `limit` bytes, as it refuses one over 1,000,000,000 by
    default (sqlite3.DataError: string or blob too big)."""
    import indexing.jobs

    real = indexing.jobs.connect_sqlite

    def connect(path: Path, **kwargs: bool) -> sqlite3.Connection:
        conn = real(path, **kwargs)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
        return conn

    monkeypatch.setattr(indexing.jobs, "connect_sqlite", connect)


def test_job_bytes_bounds_every_payload_as_the_job_store_records_it(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [{"id": f"d{i:02d}", "text": f"text {i:02d} about the tides " + "and the moon " * 20} for i in range(10)]
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    args = [*_args(tmp_path, tiny_embedder_dir), "--collection", "c"]
    one = len(json.dumps(docs[0]))
    bound = 2 + 3 * one + 2 * 2  # "[a, b, c]": three documents exactly
    # The limit is on a whole row, whose other columns (id, collection, status ...) take far less than a document.
    _refuse_job_values_over(monkeypatch, bound + one // 2)
    assert main([*args, "--job-bytes", str(bound)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [_jobs(tmp_path).get(i).total for i in printed["job_ids"]] == [3, 3, 3, 1]


def test_a_job_the_store_refuses_is_one_line_and_exit_1(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*_corpus(tmp_path, tiny_embedder_dir, long_text_at=12), "--collection", "c", "--job-docs", "10"]
    _refuse_job_values_over(monkeypatch, 2000)  # the second job holds a 3,000-character document
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err and len(_job_lines(err)) == 1
    (said,) = [line for line in err.splitlines() if line.startswith("vela ingest: ") and FINISHING not in line]
    assert said.startswith("vela ingest: could not record the job of documents 11 to 20 in ")
    assert "string or blob too big (a smaller --job-bytes or --job-docs makes smaller jobs)" in said
    assert "10 of 25 documents went through" in said
    printed = json.loads(out)
    assert (printed["status"], printed["done"], len(printed["job_ids"])) == ("failed", 10, 1)
    assert CollectionStore(tmp_path / "vela").get("c").stats()["documents"] == 10
    monkeypatch.undo()
    assert main(args) == 0  # the same command again, with room: the rest
    assert CollectionStore(tmp_path / "vela").get("c").stats()["documents"] == 25


def test_an_id_repeated_jobs_apart_is_refused_before_anything_is_written(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*_corpus(tmp_path, tiny_embedder_dir), "--collection", "c", "--job-docs", "10"]
    data = tmp_path / "docs.jsonl"
    data.write_text(data.read_text() + "\n" + json.dumps({"id": "d02", "text": "again"}))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "id 'd02' is given twice (documents 3 and 26)" in err and "Traceback" not in err
    assert not (tmp_path / "vela").exists()  # no collection made, no job recorded


def _interrupt_in_the_second_job(monkeypatch: pytest.MonkeyPatch, signals: int) -> list[int]:
    """Ctrl-C (`signals` times) while the second job's first batch is encoded (5-document batches, 10-document
    jobs); the sizes of the batches encoded, returned as they come."""
    import indexing.ingest

    real = indexing.ingest.prepare_documents
    encoded: list[int] = []

    def prepare(docs: list[object], *args: object, **kwargs: object) -> object:
        encoded.append(len(docs))
        if len(encoded) == 3:
            for _ in range(signals):
                ctrl_c_handled()
        return real(docs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(indexing.ingest, "prepare_documents", prepare)
    monkeypatch.setenv("VELA_INGEST_BATCH_SIZE", "5")
    return encoded


def test_ctrl_c_in_a_later_job_stops_there_and_the_rerun_stores_only_the_rest(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*_corpus(tmp_path, tiny_embedder_dir), "--collection", "c", "--job-docs", "10"]
    _interrupt_in_the_second_job(monkeypatch, signals=1)
    assert main(args) == 130
    out, err = capsys.readouterr()
    assert "stopped at 15 of 25 documents" in err and len(_job_lines(err)) == 2  # no third job recorded
    printed = json.loads(out)
    assert (printed["status"], printed["done"]) == ("cancelled", 15)
    first, second = (_jobs(tmp_path).get(i) for i in printed["job_ids"])
    assert printed["job_id"] == second.id
    assert (first.status, first.done, second.status, second.done) == ("succeeded", 10, "cancelled", 5)
    assert _upserts(tmp_path) == 2
    assert CollectionStore(tmp_path / "vela").get("c").stats()["documents"] == 15
    monkeypatch.undo()
    encoded = _interrupt_in_the_second_job(monkeypatch, signals=0)
    assert main(args) == 0
    assert sum(encoded) == 10  # the documents stored already are not encoded again
    assert CollectionStore(tmp_path / "vela").get("c").stats()["documents"] == 25


def test_a_job_the_cli_runs_is_leased_so_a_worker_waits_for_it_however_slow(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker that finds an older write running with no progress for two minutes runs it itself, unless its
    # runner holds a live lease: the CLI's jobs are leased and renewed, so a slow batch is not run twice at once.
    import cli.ingest_run as ingest_run

    monkeypatch.setenv("VELA_CLAIM_IDLE_S", "0.3")
    real = ingest_run.run_job
    seen: list[Any] = []  # what the worker's start returned

    def slow_run_job(**kw: Any) -> Any:
        on_progress = kw["on_progress"]

        def progress(done: int, total: int) -> None:
            if not seen:
                threading.Event().wait(1.0)  # three lease lengths without progress
                worker = JobStore(tmp_path / "vela" / "jobs.sqlite3", lease_s=60)
                seen.append(worker.start(str(kw["job_id"]), "worker"))
            on_progress(done, total)

        return real(**{**kw, "on_progress": progress})

    monkeypatch.setattr(ingest_run, "run_job", slow_run_job)
    assert main([*_corpus(tmp_path, tiny_embedder_dir, n=5), "--collection", "c"]) == 0
    assert seen == [None]  # the worker could not start it: the CLI's lease was live
    ((job, _),) = _jobs(tmp_path).listing(kinds=frozenset({JobKind.UPSERT}))
    assert job.status.value == "succeeded" and job.attempts == 1
