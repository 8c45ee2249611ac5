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


def test_a_running_job_whose_lease_expired_is_queued_again_and_run_a_renewed_one_is_not(tmp_path: Path) -> None:
    # A `vela ingest` or `vela reindex` killed outright leaves its job running under a lease nobody renews: the
    # in-process queue of a server on the data directory takes it over; a job whose lease is renewed stays its own.
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    ran: list[str] = []

    def run(job_id: str) -> None:
        jobs.start(job_id)
        jobs.finish(job_id, JobStatus.SUCCEEDED)
        ran.append(job_id)

    q = InProcessQueue(jobs, run, sweep_s=0.05)
    q.start()
    try:
        # A lease far longer than the test: the live command's stays valid without renewals, however loaded the
        # machine; the killed command's is made to lapse by hand.
        cli = JobStore(tmp_path / "jobs.sqlite3", lease_s=600)
        killed = cli.create(collection="c", kind=JobKind.UPSERT, payload=[{"id": "a", "text": "x"}], running_in="cli")
        alive = cli.create(collection="d", kind=JobKind.UPSERT, payload=[{"id": "b", "text": "y"}], running_in="cli")
        assert cli.start(killed.id, "cli") is not None and cli.start(alive.id, "cli") is not None
        with sqlite3.connect(tmp_path / "jobs.sqlite3") as conn:
            conn.execute("UPDATE jobs SET lease_until = 0 WHERE id = ?", (killed.id,))
        for _ in range(600):  # the sweep runs every 0.05 s: at most 30 s on a loaded machine
            if ran:
                break
            threading.Event().wait(0.05)
        threading.Event().wait(0.3)  # a few more sweeps: the live job is left alone
    finally:
        q.stop()
    assert ran == [killed.id]
    assert jobs.get(killed.id).status == JobStatus.SUCCEEDED and jobs.get(alive.id).status == JobStatus.RUNNING


def test_lanes_leave_a_live_leased_job_alone_at_start_and_take_over_only_their_own_kinds(tmp_path: Path) -> None:
    from indexing.lanes import LaneQueue

    jobs = JobStore(tmp_path / "jobs.sqlite3")
    lanes_ran: dict[str, list[str]] = {"writes": [], "generations": []}
    cli = JobStore(tmp_path / "jobs.sqlite3", lease_s=600)  # a live `vela reindex` and a live `vela ingest`
    live = cli.create(collection="c", kind=JobKind.REINDEX, payload=[{}], running_in="cli")
    assert cli.start(live.id, "cli") is not None
    lost_write = cli.create(collection="w", kind=JobKind.UPSERT, payload=[{"id": "a", "text": "x"}], running_in="cli")
    lost_reindex = cli.create(collection="g", kind=JobKind.REINDEX, payload=[{}], running_in="cli")
    for job in (lost_write, lost_reindex):
        assert cli.start(job.id, "cli") is not None

    q = LaneQueue(jobs, lambda job_id: None)
    for name in ("writes", "generations"):
        lane = getattr(q, name)
        lane._sweep_s = 0.05

        def run(job_id: str, name: str = name) -> None:
            jobs.start(job_id)
            jobs.finish(job_id, JobStatus.SUCCEEDED)
            lanes_ran[name].append(job_id)

        lane._run = run
    q.start()
    try:
        threading.Event().wait(0.3)
        assert lanes_ran == {"writes": [], "generations": []}  # every lease is live: nothing queued at start
        with sqlite3.connect(tmp_path / "jobs.sqlite3") as conn:  # the two commands die: their leases lapse
            conn.execute("UPDATE jobs SET lease_until = 0 WHERE id IN (?, ?)", (lost_write.id, lost_reindex.id))
        for _ in range(600):
            if lanes_ran["writes"] and lanes_ran["generations"]:
                break
            threading.Event().wait(0.05)
    finally:
        q.stop()
    assert lanes_ran == {"writes": [lost_write.id], "generations": [lost_reindex.id]}
    assert jobs.get(live.id).status == JobStatus.RUNNING
