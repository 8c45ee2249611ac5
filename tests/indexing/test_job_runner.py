"""Several processes' queues over one job store: one runs the jobs, each exactly once, and another takes over
when it stops. Two SharedLaneQueues in one process stand for two processes: flock locks belong to an open
file, so the second queue's lock conflicts with the first's as another process's would."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from indexing.job_runner import SharedLaneQueue
from indexing.jobs import JobKind, JobStatus, JobStore


def _until(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout  # a guard against a hang, not a timed assertion
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.02)


class Runs:
    """A job function that records which queue ran which job, then finishes it."""

    def __init__(self, jobs: JobStore) -> None:
        self.jobs = jobs
        self.by: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def for_queue(self, name: str):  # type: ignore[no-untyped-def]
        def run(job_id: str) -> None:
            with self.lock:
                self.by[(name, job_id)] += 1
            self.jobs.start(job_id)
            self.jobs.finish(job_id, JobStatus.SUCCEEDED)

        return run


def _queue(jobs: JobStore, runs: Runs, name: str, tmp_path: Path, leads: list[str]) -> SharedLaneQueue:
    lock = tmp_path / "jobs.lock"
    return SharedLaneQueue(jobs, runs.for_queue(name), lock, on_lead=lambda: leads.append(name), poll_s=0.02)


def test_one_queue_runs_every_job_once_whoever_recorded_it(tmp_path: Path) -> None:
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    runs = Runs(jobs)
    leads: list[str] = []
    a, b = (_queue(jobs, runs, name, tmp_path, leads) for name in "ab")
    a.start()
    b.start()
    try:
        assert (a.leading, b.leading, leads) == (True, False, ["a"])
        ids = []
        for i in range(40):  # recorded and submitted by either process, as its routes would
            job = jobs.create(collection="c", kind=JobKind.DELETE, payload=[str(i)])
            (a if i % 2 else b).submit(job.id)
            ids.append(job.id)
        _until(lambda: all(jobs.get(j).status == "succeeded" for j in ids))
        time.sleep(0.2)  # a few more polls: none may run a finished job again
        assert runs.by == Counter({("a", j): 1 for j in ids})
    finally:
        b.stop()
        a.stop()


def test_the_other_queue_takes_over_and_runs_what_was_left(tmp_path: Path) -> None:
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    runs = Runs(jobs)
    leads: list[str] = []
    a, b = (_queue(jobs, runs, name, tmp_path, leads) for name in "ab")
    a.start()
    b.start()
    try:
        a.stop()  # the runner goes (a dead process's lock is released the same way, by the kernel)
        left = jobs.create(collection="c", kind=JobKind.DELETE, payload=["x"])  # recorded meanwhile, never submitted
        jobs.start(left.id)  # and even marked running, as a job the dead runner was in the middle of
        _until(lambda: jobs.get(left.id).status == "succeeded")
        assert b.leading and leads == ["a", "b"] and runs.by == Counter({("b", left.id): 1})
    finally:
        b.stop()
