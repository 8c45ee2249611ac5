"""Several processes' queues over one job store: one runs the jobs, each exactly once, and another takes over
when it stops. Two SharedLaneQueues in one process stand for two processes: flock locks belong to an open
file, so the second queue's lock conflicts with the first's as another process's would."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from indexing.job_runner import SharedLaneQueue
from indexing.jobs import JobKind, JobStatus, JobStore
from velaio.files import try_file_lock


def _until(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout  # a guard against a hang, not a timed assertion
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.02)


class Runs:
    """A job function that records which queue ran which job, then finishes it. Like the real one
    (indexing/ingest.py run_job), it runs nothing for a job that has ended by the time it is handed over: a poll
    that reads the job store just before a job ends may hand it over once more (at-least-once), and that hand-over
    must change nothing."""

    def __init__(self, jobs: JobStore) -> None:
        self.jobs = jobs
        self.by: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def for_queue(self, name: str):  # type: ignore[no-untyped-def]
        def run(job_id: str) -> None:
            if self.jobs.start(job_id).status != JobStatus.RUNNING:
                return  # ended meanwhile: run_job returns here too
            with self.lock:
                self.by[(name, job_id)] += 1
            self.jobs.finish(job_id, JobStatus.SUCCEEDED)

        return run


@dataclass
class Pair:
    jobs: JobStore
    runs: Runs
    leads: list[str]  # which queue took the lock, in order
    a: SharedLaneQueue
    b: SharedLaneQueue


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    """Two queues over one job store, started in this order: `a` takes the lock."""
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    runs, leads = Runs(jobs), []

    def queue(name: str) -> SharedLaneQueue:
        lock = tmp_path / "jobs.lock"
        return SharedLaneQueue(jobs, runs.for_queue(name), lock, on_lead=lambda: leads.append(name), poll_s=0.02)

    out = Pair(jobs, runs, leads, queue("a"), queue("b"))
    out.a.start()
    out.b.start()
    yield out
    out.b.stop()
    out.a.stop()


def test_one_queue_runs_every_job_once_whoever_recorded_it(pair: Pair) -> None:
    jobs, a, b = pair.jobs, pair.a, pair.b
    assert (a.leading, b.leading, pair.leads) == (True, False, ["a"])
    ids = []
    for i in range(40):  # recorded and submitted by either process, as its routes would
        job = jobs.create(collection="c", kind=JobKind.DELETE, payload=[str(i)])
        (a if i % 2 else b).submit(job.id)
        ids.append(job.id)
    _until(lambda: all(jobs.get(j).status == "succeeded" for j in ids))
    time.sleep(0.2)  # a few more polls: none may run a finished job again
    assert pair.runs.by == Counter({("a", j): 1 for j in ids})


def test_the_other_queue_takes_over_and_runs_what_was_left(pair: Pair) -> None:
    jobs = pair.jobs
    pair.a.stop()  # the runner goes (a dead process's lock is released the same way, by the kernel)
    left = jobs.create(collection="c", kind=JobKind.DELETE, payload=["x"])  # recorded meanwhile, never submitted
    jobs.start(left.id)  # and even marked running, as a job the dead runner was in the middle of
    _until(lambda: jobs.get(left.id).status == "succeeded")
    assert pair.b.leading and pair.leads == ["a", "b"] and pair.runs.by == Counter({("b", left.id): 1})


def test_jobs_run_in_the_order_they_were_recorded_whichever_process_recorded_them(tmp_path: Path) -> None:
    # The runner's own job used to go to its lanes at once, while one the other process had recorded just
    # before (its client already answered) waited for the next poll: two writes in a row ran newest first, and
    # the newer one was lost. A long poll makes that window certain here.
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    order: list[str] = []

    def run(job_id: str) -> None:
        order.append(job_id)
        jobs.start(job_id)
        jobs.finish(job_id, JobStatus.SUCCEEDED)

    a = SharedLaneQueue(jobs, run, tmp_path / "jobs.lock", poll_s=30.0)
    b = SharedLaneQueue(jobs, run, tmp_path / "jobs.lock", poll_s=30.0)
    a.start()
    b.start()
    try:
        ids = []
        for i in range(12):
            job = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[str(i)])
            (b if i % 3 else a).submit(job.id)  # b records two, then the runner one, and so on
            ids.append(job.id)
        _until(lambda: len(order) >= 10)  # up to the runner's last one, i = 9 (10 and 11 wait for a poll)
        assert order[:10] == ids[:10]
    finally:
        b.stop()
        a.stop()


def test_a_job_a_command_runs_itself_is_left_to_it(pair: Pair) -> None:
    # `vela reindex` and `vela ingest` record their job as running in themselves: a server's runner that polled
    # it up ran it a second time, beside the command.
    jobs = pair.jobs
    own = jobs.create(collection="c", kind=JobKind.REINDEX, payload=["x"], running_in="vela-reindex")
    assert own.status == JobStatus.RUNNING and own.started_at is not None and own.attempts == 0
    queued = jobs.create(collection="c", kind=JobKind.UPSERT, payload=["y"])
    _until(lambda: jobs.get(queued.id).status == "succeeded")  # polls have come and gone
    assert jobs.get(own.id).status == JobStatus.RUNNING and all(j != own.id for _, j in pair.runs.by)


def _lock_free(lock: Path) -> bool:
    with try_file_lock(lock) as free:
        return free


def test_a_process_told_to_stop_takes_no_lock(pair: Pair, tmp_path: Path) -> None:
    # A process that drains its connections after SIGTERM used to take the lock the exiting runner gave back, and
    # start the queued jobs there, to be killed in the middle of one.
    jobs, a, b = pair.jobs, pair.a, pair.b
    b.stop_starting()
    a.stop()
    queued = jobs.create(collection="c", kind=JobKind.DELETE, payload=["x"])
    b.submit(queued.id)
    assert not b.try_lead() and not b.leading
    assert _lock_free(tmp_path / "jobs.lock")
    assert jobs.get(queued.id).status == JobStatus.QUEUED and pair.leads == ["a"]


@dataclass
class Gated:
    jobs: JobStore
    gate: threading.Event  # the job named `slow` runs until it is set
    runner: SharedLaneQueue
    other: SharedLaneQueue
    slow: str


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[Gated]:
    """Two queues over one job store; the runner is in the middle of a job that ends when `gate` is set."""
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    gate = threading.Event()
    slow = jobs.create(collection="c", kind=JobKind.DELETE, payload=["slow"]).id

    def run(job_id: str) -> None:
        jobs.start(job_id)
        if job_id == slow:
            gate.wait()
        jobs.finish(job_id, JobStatus.SUCCEEDED)

    lock = tmp_path / "jobs.lock"
    runner = SharedLaneQueue(jobs, run, lock, poll_s=0.02)
    other = SharedLaneQueue(jobs, run, lock, poll_s=0.02)
    runner.start()
    other.start()
    _until(lambda: jobs.get(slow).status == JobStatus.RUNNING)
    out = Gated(jobs, gate, runner, other, slow)
    yield out
    gate.set()
    other.stop()
    runner.stop()


def test_a_runner_told_to_stop_finishes_its_job_and_starts_no_other(gated: Gated) -> None:
    jobs, runner = gated.jobs, gated.runner
    queued = jobs.create(collection="c", kind=JobKind.DELETE, payload=["q"])
    runner.submit(queued.id)
    runner.stop_starting()
    later = jobs.create(collection="c", kind=JobKind.DELETE, payload=["l"])
    runner.submit(later.id)  # recorded after the signal: left to the next runner
    gated.gate.set()
    runner.stop()
    assert jobs.get(gated.slow).status == JobStatus.SUCCEEDED
    assert [(jobs.get(j).status, jobs.get(j).attempts) for j in (queued.id, later.id)] == [(JobStatus.QUEUED, 0)] * 2


def test_the_lock_is_kept_until_the_running_job_ends(gated: Gated, tmp_path: Path) -> None:
    # stop() used to give the lock back when its wait ran out, with the job still running: another process would
    # then take the lock and run that job a second time, beside it.
    jobs, runner, other = gated.jobs, gated.runner, gated.other
    runner.stop(timeout=0.05)  # the job runs on: it waits for the gate
    assert jobs.get(gated.slow).status == JobStatus.RUNNING
    assert not other.try_lead() and not _lock_free(tmp_path / "jobs.lock")
    gated.gate.set()  # the job ends, and with it the lock
    _until(lambda: other.leading)
    assert jobs.get(gated.slow).status == JobStatus.SUCCEEDED and jobs.get(gated.slow).attempts == 1
