"""Finished jobs are deleted once past the retention (VELA_JOBS_RETENTION_DAYS): the job store stops growing under
steady writes (a soak of 35 minutes left 2,172 rows, for ever). Unfinished jobs stay, however old."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from indexing import job_retention
from indexing.jobs import JobKind, JobNotFound, JobStatus, JobStore
from indexing.settings import IndexingSettings


def _age(store: JobStore, job_id: str, seconds: float) -> None:
    with sqlite3.connect(store.path) as conn:
        conn.execute(
            "UPDATE jobs SET created_at = created_at - ?, finished_at = finished_at - ? WHERE id = ?",
            (seconds, seconds, job_id),
        )


def test_finished_jobs_past_the_retention_are_deleted_unfinished_ones_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JobStore(tmp_path / "jobs.sqlite3", retention_s=3600)
    old_done, old_failed, old_queued, recent = (
        store.create(collection="c", kind=JobKind.UPSERT, payload=[]) for _ in range(4)
    )
    for job, status in ((old_done, JobStatus.SUCCEEDED), (old_failed, JobStatus.FAILED), (recent, JobStatus.SUCCEEDED)):
        store.start(job.id)
        store.finish(job.id, status)
    for job in (old_done, old_failed, old_queued):
        _age(store, job.id, 2 * 3600)
    monkeypatch.setattr(store.retention, "next_purge", 0.0)  # as if the last purge were long ago
    store.create(collection="c", kind=JobKind.UPSERT, payload=[])  # a write: retention runs where jobs are made
    for gone in (old_done, old_failed):
        with pytest.raises(JobNotFound):
            store.get(gone.id)
    assert store.get(old_queued.id).status == JobStatus.QUEUED and store.get(recent.id).status == JobStatus.SUCCEEDED
    # At most once per PURGE_EVERY_S in a process: the next write does not look again.
    store.start(recent.id)
    store.finish(recent.id, JobStatus.SUCCEEDED)
    _age(store, recent.id, 2 * 3600)
    store.create(collection="c", kind=JobKind.UPSERT, payload=[])
    assert store.get(recent.id).status == JobStatus.SUCCEEDED
    assert time.monotonic() < store.retention.next_purge <= time.monotonic() + job_retention.PURGE_EVERY_S


def test_retention_zero_keeps_every_job_and_the_default_is_a_week(tmp_path: Path) -> None:
    assert IndexingSettings(data_dir=tmp_path).jobs_retention_s() == 7 * 86_400
    assert IndexingSettings(data_dir=tmp_path, jobs_retention_days=0).jobs_retention_s() is None
    store = JobStore(tmp_path / "jobs.sqlite3", retention_s=None)
    job = store.create(collection="c", kind=JobKind.UPSERT, payload=[])
    store.start(job.id)
    store.finish(job.id, JobStatus.SUCCEEDED)
    _age(store, job.id, 10 * 365 * 86_400)
    store.create(collection="c", kind=JobKind.UPSERT, payload=[])
    assert store.get(job.id).status == JobStatus.SUCCEEDED


def test_dropped_payloads_give_their_space_back_and_a_failed_job_keeps_its(tmp_path: Path) -> None:
    """Tens of megabytes of queued documents leave the file (and its write-ahead log) when the job is cancelled or
    ends; a failed job keeps its payload, for a retry."""
    store = JobStore(tmp_path / "jobs.sqlite3")
    big = ["x" * 3000] * 10_000  # ~30 MB as JSON, as a 10,000-document batch of 3 KB texts
    ids = [store.create(collection="c", kind=JobKind.UPSERT, payload=big).id for _ in range(3)]
    assert (tmp_path / "jobs.sqlite3").stat().st_size > 80 * 2**20
    store.request_cancel(ids[0])
    store.start(ids[1])
    store.finish(ids[1], JobStatus.SUCCEEDED)
    store.start(ids[2])
    store.finish(ids[2], JobStatus.FAILED, "disk full")
    assert store.payload(ids[2]) == big
    assert (tmp_path / "jobs.sqlite3").stat().st_size < 40 * 2**20
    assert (tmp_path / "jobs.sqlite3-wal").stat().st_size <= 16 * 2**20
