"""A job runs in one place at a time: JobStore.start is one conditional update, so of two workers (two job stores on
one file, each leasing what it starts) only one marks a job running while the other's lease is live; the other
waits for that run and then skips the job. An older write that another worker runs first is so run once, its own
worker waiting for it, and the newer write waiting behind it still runs after it."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from indexing import job_start
from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.store import CollectionStore
from indexing.write_order import let_older_writes_end
from models import EmbedderCache
from tests.redis_fixtures import until
from velaio.files import file_lock


def _expire(path: Path, job_id: str) -> None:
    """The lease as a worker that died an hour ago left it."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE jobs SET lease_until = lease_until - 3600 WHERE id = ?", (job_id,))


def _write(jobs: JobStore, text: str) -> str:
    return jobs.create(collection="c1", kind=JobKind.UPSERT, payload=[{"id": "x", "text": text}]).id


def test_only_one_of_two_workers_starts_a_job_while_its_lease_is_live(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    w1, w2, cli = JobStore(path, lease_s=60), JobStore(path, lease_s=60), JobStore(path)
    job_id = _write(w1, "t")
    started = [w1.start(job_id, "w1"), w2.start(job_id, "w2")]
    assert started[0] is not None and started[1] is None
    assert cli.start(job_id, "cli") is None  # an unleased runner waits for a live worker's run too
    job = w1.get(job_id)
    assert job.status == JobStatus.RUNNING and job.attempts == 1 and w1.worker(job_id) == "w1"
    again = w1.start(job_id, "w1")  # its own (a run of this process that could not record its end)
    assert again is not None and again.attempts == 2

    _expire(path, job_id)  # w1 died: its lease ran out
    taken = w2.start(job_id, "w2")
    assert taken is not None and taken.attempts == 3 and w2.worker(job_id) == "w2"
    w2.finish(job_id, JobStatus.SUCCEEDED)
    ended = w1.start(job_id, "w1")  # ended: returned as it is, nothing changed
    assert ended is not None and ended.status == JobStatus.SUCCEEDED and ended.attempts == 3


def test_two_threads_starting_one_job_together_run_it_once(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    stores = [JobStore(path, lease_s=60) for _ in range(8)]
    job_id = _write(stores[0], "t")
    gate = threading.Barrier(len(stores))
    got: list[Any] = [None] * len(stores)

    def start(i: int) -> None:
        gate.wait()
        got[i] = stores[i].start(job_id, f"w{i}")

    threads = [threading.Thread(target=start, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(job is not None for job in got) == 1 and stores[0].get(job_id).attempts == 1


def test_an_unleased_running_job_is_run_again_after_a_crash(tmp_path: Path) -> None:
    """`vela serve` and a CLI start jobs unleased; one a crash left running is run again at the next start."""
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    job_id = _write(jobs, "t")
    assert jobs.start(job_id) is not None
    again = jobs.start(job_id)
    assert again is not None and again.attempts == 2


@pytest.fixture
def two_workers(tmp_path: Path, settings: CollectionSettings) -> dict[str, Any]:
    """Two workers on one data directory: each its own job store (leasing) and collection store, as processes."""
    data = tmp_path / "data"
    CollectionStore(data).create(settings)
    path = data / "jobs.sqlite3"
    return {name: (JobStore(path, lease_s=60), CollectionStore(data)) for name in ("w1", "w2")} | {"data": data}


def _run(worker: tuple[JobStore, CollectionStore], name: str, job_id: str, embedders: EmbedderCache) -> JobStatus:
    jobs, collections = worker
    return run_job(job_id=job_id, jobs=jobs, collections=collections, embedders=embedders, worker=name)


def _held_back(jobs: JobStore) -> threading.Event:
    """Set once `jobs` has been refused a start (another run holds the job)."""
    refused = threading.Event()
    real = jobs.start

    def start(job_id: str, worker: str = "in-process") -> Any:
        job = real(job_id, worker)
        if job is None:
            refused.set()
        return job

    jobs.start = start  # type: ignore[method-assign]
    return refused


def test_an_older_write_run_first_by_another_worker_is_not_run_again_by_its_own(
    two_workers: dict[str, Any], embedders: EmbedderCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """w1 takes the newer write and runs the older one first; w2, the older one's own worker, takes it meanwhile:
    it waits for w1's run instead of running the write a second time beside it, then skips it."""
    monkeypatch.setattr(job_start, "POLL_S", 0.01)
    (jobs, _), data = two_workers["w1"], two_workers["data"]
    older, newer = _write(jobs, "the older write"), _write(jobs, "the newer write")
    refused = _held_back(two_workers["w2"][0])
    status: dict[str, JobStatus] = {}
    threads = {
        "w1": threading.Thread(
            target=lambda: status.update(w1=_run(two_workers["w1"], "w1", newer, embedders)), daemon=True
        ),
        "w2": threading.Thread(
            target=lambda: status.update(w2=_run(two_workers["w2"], "w2", older, embedders)), daemon=True
        ),
    }
    with file_lock(data / "collections" / "c1" / "write.lock"):  # every write waits here, once marked running
        threads["w1"].start()
        until("w1 runs the older write first", lambda: jobs.get(older).status == JobStatus.RUNNING)
        threads["w2"].start()
        until("w2 takes the older write", lambda: refused.is_set() or jobs.get(older).attempts > 1)
        assert jobs.get(older).attempts == 1 and jobs.worker(older) == "w1"
    for t in threads.values():
        t.join(60)
        assert not t.is_alive()
    assert status == {"w1": JobStatus.SUCCEEDED, "w2": JobStatus.SUCCEEDED}
    assert jobs.get(older).attempts == 1 and jobs.worker(older) == "w1"  # run once, by w1
    assert jobs.counts().documents["upsert"] == 2  # each write's document counted once
    record = two_workers["w1"][1].get("c1").document("x", passages=False)
    assert record is not None and record.text == "the newer write"


def test_a_stalled_older_write_whose_worker_is_alive_is_waited_for_not_taken_over(
    two_workers: dict[str, Any], embedders: EmbedderCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No progress for the stall time, but a live lease (its worker waits for the collection's lock): the newer
    write's worker waits for that run to end instead of taking it over, and then runs itself."""
    monkeypatch.setattr(job_start, "POLL_S", 0.01)
    (jobs, _), data = two_workers["w1"], two_workers["data"]
    older, newer = _write(jobs, "the older write"), _write(jobs, "the newer write")
    refused = _held_back(jobs)
    status: list[JobStatus] = []

    def run_here(job_id: str) -> JobStatus:
        return _run(two_workers["w1"], "w1", job_id, embedders)

    def newer_write() -> None:
        let_older_writes_end(jobs.get(newer), jobs, run_here, stall_s=0.0)  # taken for stalled at once
        status.append(run_here(newer))

    w2 = threading.Thread(target=lambda: status.append(_run(two_workers["w2"], "w2", older, embedders)), daemon=True)
    w1 = threading.Thread(target=newer_write, daemon=True)
    with file_lock(data / "collections" / "c1" / "write.lock"):
        w2.start()
        until("w2 runs the older write", lambda: jobs.get(older).status == JobStatus.RUNNING)
        w1.start()
        until("w1 takes the older write", lambda: refused.is_set() or jobs.get(older).attempts > 1)
        assert jobs.get(older).attempts == 1 and jobs.worker(older) == "w2"
    for t in (w2, w1):
        t.join(60)
        assert not t.is_alive()
    assert status == [JobStatus.SUCCEEDED, JobStatus.SUCCEEDED]
    assert jobs.get(older).attempts == 1 and jobs.worker(older) == "w2"  # not taken over
    assert jobs.get(newer).status == JobStatus.SUCCEEDED
    record = two_workers["w1"][1].get("c1").document("x", passages=False)
    assert record is not None and record.text == "the newer write"
