"""A job that crashed outside its own error handling (its store could not be written as it started: a full disk)
is run again after a backoff, not left queued until a restart."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.queue import InProcessQueue, RunAgain


def test_a_job_whose_start_failed_runs_again_once_the_store_takes_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(RunAgain, "FIRST_WAIT_S", 0.05)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    job = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{"id": "a", "text": "x"}])
    full = [2]  # the store refuses the first two starts, as SQLite does on a full disk
    real_start = jobs.start
    ran = threading.Event()

    def start(job_id: str, worker: str = "in-process") -> object:
        if full[0]:
            full[0] -= 1
            raise sqlite3.OperationalError("database or disk is full")
        return real_start(job_id, worker)

    def run(job_id: str) -> None:
        start(job_id)
        jobs.finish(job_id, JobStatus.SUCCEEDED)
        ran.set()

    q = InProcessQueue(jobs, run)
    q.start()
    q.submit(job.id)
    try:
        assert ran.wait(30)
    finally:
        q.stop()
    assert full == [0]
    assert jobs.get(job.id).status == JobStatus.SUCCEEDED
    # The first crash is an error with its traceback; each retry after it one warning line.
    crashed = [r for r in caplog.records if r.getMessage() == "job crashed"]
    again = [r for r in caplog.records if r.getMessage() == "job will run again"]
    assert len(crashed) == 1 and crashed[0].levelname == "ERROR" and crashed[0].exc_info is not None
    assert len(again) == 2 and all(r.levelname == "WARNING" and r.exc_info is None for r in again)


def test_a_stopping_queue_hands_nothing_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put: list[str] = []
    stopping = threading.Event()
    again = RunAgain(put.append, stopping)
    monkeypatch.setattr(RunAgain, "FIRST_WAIT_S", 0.01)
    stopping.set()
    again.later("j1", OSError("full"))
    threading.Event().wait(0.2)
    assert put == []  # the job stays queued in the store, for the next start
