"""Job leases (indexing/job_leases.py): a store made with `lease_s` leases the jobs it starts, renews only its own,
and a running job whose lease expired goes back to queued, unless it ended or its lease was renewed meanwhile. A
job started without a lease is never taken for abandoned."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from indexing.jobs import JobKind, JobStatus, JobStore


def _lease(store: JobStore, job_id: str) -> tuple[str | None, float | None]:
    with sqlite3.connect(store.path) as conn:
        row = conn.execute("SELECT lease_owner, lease_until FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return row[0], row[1]


def _expire(store: JobStore, job_id: str) -> None:
    """The lease as its worker left it an hour ago."""
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE jobs SET lease_until = lease_until - 3600 WHERE id = ?", (job_id,))


def test_a_leasing_store_leases_what_it_starts_and_renews_only_its_own(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    mine, other = JobStore(path, lease_s=60), JobStore(path, lease_s=60)  # two worker processes
    assert mine.leases.owner != other.leases.owner
    a = mine.create(collection="c", kind=JobKind.UPSERT, payload=[{}]).id
    b = mine.create(collection="c", kind=JobKind.UPSERT, payload=[{}]).id
    mine.start(a, "w1")
    other.start(b, "w1")  # the same name (a restarted container), another process
    owner_a, until_a = _lease(mine, a)
    assert owner_a == mine.leases.owner and until_a is not None
    _expire(mine, a)
    _expire(mine, b)
    assert mine.leases.renew() == 1  # its own running job only
    assert mine.leases.expired() == [b]  # a's lease is pushed ahead again; b's owner renews its own
    mine.finish(a, JobStatus.SUCCEEDED)
    assert mine.leases.renew() == 0  # an ended job is not renewed


def test_an_expired_running_job_goes_back_to_queued_once(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite3", lease_s=60)
    job = store.create(collection="c", kind=JobKind.UPSERT, payload=[{"id": "a", "text": "t"}])
    store.start(job.id, "w1")
    store.progress(job.id, 1)
    assert store.leases.expired() == []  # alive
    _expire(store, job.id)
    assert store.leases.expired() == [job.id]
    assert store.leases.requeue_expired(job.id)
    queued = store.get(job.id)
    assert queued.status == JobStatus.QUEUED and queued.started_at is None and queued.done == 0
    assert queued.attempts == 1 and _lease(store, job.id) == (None, None)
    assert store.payload(job.id) == [{"id": "a", "text": "t"}]  # the re-run has its documents
    assert not store.leases.requeue_expired(job.id)  # queued already
    assert store.start(job.id, "w2").attempts == 2


def test_a_job_renewed_or_ended_since_it_was_read_is_left_alone(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite3", lease_s=60)
    renewed, ended = (store.create(collection="c", kind=JobKind.UPSERT, payload=[{}]).id for _ in range(2))
    for job_id in (renewed, ended):
        store.start(job_id, "w1")
        _expire(store, job_id)
    assert store.leases.expired() == [renewed, ended]
    store.leases.renew()  # the worker was alive after all (paused, a busy job store)
    store.finish(ended, JobStatus.SUCCEEDED)
    assert not store.leases.requeue_expired(renewed) and not store.leases.requeue_expired(ended)
    assert store.get(renewed).status == JobStatus.RUNNING and store.get(ended).status == JobStatus.SUCCEEDED


def test_a_job_started_without_a_lease_is_never_abandoned(tmp_path: Path) -> None:
    """The in-process queue and a CLI that runs a job start it unleased; one that takes over a job a dead worker
    leased clears that lease, so the job is not queued again while it runs there."""
    path = tmp_path / "jobs.sqlite3"
    worker, cli = JobStore(path, lease_s=60), JobStore(path)
    own = cli.create(collection="c", kind=JobKind.UPSERT, payload=[{}], running_in="cli")
    taken = worker.create(collection="c", kind=JobKind.UPSERT, payload=[{}]).id
    worker.start(taken, "w1")
    _expire(worker, taken)
    cli.start(taken, "cli")  # an older write the CLI runs itself (indexing/write_order.py)
    assert _lease(cli, own.id) == (None, None) and _lease(cli, taken) == (None, None)
    assert worker.leases.expired() == [] and cli.leases.renew() == 0


def test_a_jobs_table_from_before_leases_gains_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, collection TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT "
            "NULL, done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL, error TEXT, payload TEXT, "
            "cancel_requested INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, created_at REAL NOT "
            "NULL, started_at REAL, finished_at REAL, worker TEXT, result TEXT)"
        )
        conn.execute(
            "INSERT INTO jobs(id, collection, kind, status, total, payload, created_at, started_at, worker) "
            "VALUES ('old', 'c', 'upsert', 'running', 1, '[]', 1.0, 2.0, 'w0')"
        )
    store = JobStore(path, lease_s=60)
    assert _lease(store, "old") == (None, None)
    assert store.leases.expired() == []  # a job an older worker ran has no lease to expire
    new = store.create(collection="c", kind=JobKind.UPSERT, payload=[{}]).id
    assert store.start(new, "w1").status == JobStatus.RUNNING and _lease(store, new)[0] == store.leases.owner
