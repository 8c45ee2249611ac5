"""The embedded queue's lanes: long jobs (reindex, restore) run beside the writes, not before them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from indexing.jobs import JobKind, JobStore
from indexing.lanes import LaneQueue


@pytest.mark.parametrize("long_kind", [JobKind.REINDEX, JobKind.RESTORE])
def test_a_write_runs_while_a_long_job_runs(tmp_path: Path, long_kind: JobKind) -> None:
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    release, write_done = threading.Event(), threading.Event()
    long_job = jobs.create(collection="restored", kind=long_kind, payload=[{}])
    write = jobs.create(collection="notes", kind=JobKind.UPSERT, payload=[])

    def run(job_id: str) -> None:
        if job_id == long_job.id:
            assert release.wait(60), "the long job was never released"
        else:
            write_done.set()

    queue = LaneQueue(jobs, run)
    queue.start()
    try:
        queue.submit(long_job.id)
        queue.submit(write.id)
        assert write_done.wait(30)  # while the long job still holds its lane
    finally:
        release.set()
        queue.stop()


def test_a_stop_waits_for_the_running_jobs_only_and_leaves_the_backlog_queued(tmp_path: Path) -> None:
    """A shutdown ran every queued write first (its port already closed), then waited on each lane in turn. Now
    each lane finishes the job it runs; the jobs behind it stay queued in the store and run after the restart."""
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    started, release, ran = threading.Event(), threading.Event(), []
    running = jobs.create(collection="notes", kind=JobKind.UPSERT, payload=[])
    backlog = [jobs.create(collection="notes", kind=JobKind.UPSERT, payload=[]) for _ in range(3)]

    def run(job_id: str) -> None:
        ran.append(job_id)
        if job_id == running.id:
            started.set()
            assert release.wait(60)

    queue = LaneQueue(jobs, run)
    queue.start()
    queue.submit(running.id)
    for job in backlog:
        queue.submit(job.id)
    assert started.wait(30)
    threading.Timer(0.2, release.set).start()  # the running job ends while stop() waits for it
    queue.stop(timeout=30)
    assert ran == [running.id]
    assert {j.id for j in backlog} <= set(jobs.unfinished())  # still to run (the fake runner finishes nothing)
    again = LaneQueue(jobs, run)  # the restart: the backlog runs
    again.start()
    again.join()
    again.stop()
    assert set(ran[1:]) >= {j.id for j in backlog}


def test_once_told_to_stop_a_lane_starts_no_job_before_the_stop_itself(tmp_path: Path) -> None:
    """The server's SIGTERM tells the lanes at once (stop_starting); `stop` comes only after the open connections
    are drained. Meanwhile the job that runs ends, and the backlog behind it must not start."""
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    started, release, ran = threading.Event(), threading.Event(), []
    running = jobs.create(collection="notes", kind=JobKind.UPSERT, payload=[])
    backlog = jobs.create(collection="notes", kind=JobKind.UPSERT, payload=[])

    def run(job_id: str) -> None:
        ran.append(job_id)
        if job_id == running.id:
            started.set()
            assert release.wait(60)

    queue = LaneQueue(jobs, run)
    queue.start()
    try:
        queue.submit(running.id)
        queue.submit(backlog.id)
        assert started.wait(30)
        queue.stop_starting()
        release.set()
        queue.writes.wait_stopped(30)  # the lane ends when it takes the backlog's job, without running it
        assert not queue.writes.running() and ran == [running.id]
    finally:
        release.set()
        queue.stop()
    assert backlog.id in jobs.unfinished()
