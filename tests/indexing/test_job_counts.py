"""The job store's counts for metrics (indexing/job_counts.py): jobs by kind and status, and the totals its
triggers keep of jobs finished and documents indexed, whichever way a job ends."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from indexing.jobs import JobKind, JobStatus, JobStore


def _store(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "jobs.sqlite3")


def test_each_ending_counts_once_by_kind_and_status(tmp_path: Path) -> None:
    jobs = _store(tmp_path)
    done = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{}] * 3)
    jobs.start(done.id)
    assert jobs.finish(done.id, JobStatus.SUCCEEDED)
    assert not jobs.finish(done.id, JobStatus.FAILED)  # a second run ending later changes nothing: not counted
    cancelled = jobs.create(collection="c", kind=JobKind.DELETE, payload=["a"])
    jobs.request_cancel(cancelled.id)
    refused = jobs.create(collection="c", kind=JobKind.PATCH, payload=[{}])
    assert jobs.fail_if_queued(refused.id, "queue down")
    running = jobs.create(collection="d", kind=JobKind.UPSERT, payload=[{}])
    queued = jobs.create(collection="d", kind=JobKind.UPSERT, payload=[{}])
    jobs.start(running.id)
    jobs.cancel_collection("d")  # the queued one is cancelled now; the running one when it stops
    counts = jobs.counts()
    assert counts.finished == {
        ("upsert", "succeeded"): 1,
        ("delete", "cancelled"): 1,
        ("patch", "failed"): 1,
        ("upsert", "cancelled"): 1,
    }
    assert jobs.get(queued.id).status == JobStatus.CANCELLED and jobs.get(queued.id).finished_at is not None
    assert jobs.payload(queued.id) == []  # a cancelled job's documents are dropped, as a cancel drops them
    assert jobs.cancel_requested(running.id) and jobs.get(running.id).finished_at is None
    assert counts.by_status[("upsert", "running")] == 1
    assert counts.by_status[("upsert", "succeeded")] == 1
    assert counts.by_status[("reindex", "queued")] == 0  # every kind and status, 0 where none
    assert len(counts.by_status) == len(JobKind) * len(JobStatus)


def test_a_retried_job_that_ends_again_counts_again(tmp_path: Path) -> None:
    jobs = _store(tmp_path)
    job = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{}])
    jobs.start(job.id)
    jobs.finish(job.id, JobStatus.FAILED, "disk full")
    jobs.requeue(job.id)
    jobs.start(job.id)
    jobs.finish(job.id, JobStatus.SUCCEEDED)
    assert jobs.counts().finished == {("upsert", "failed"): 1, ("upsert", "succeeded"): 1}


def test_documents_indexed_follow_progress_and_count_a_restart_again(tmp_path: Path) -> None:
    jobs = _store(tmp_path)
    job = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{}] * 10)
    jobs.start(job.id)
    jobs.progress(job.id, 4)
    jobs.progress(job.id, 6)
    assert jobs.counts().documents["upsert"] == 6
    jobs.start(job.id)  # run again after a crash: its count starts over from 0
    jobs.progress(job.id, 3)
    jobs.progress(job.id, 10)
    assert jobs.counts().documents == {"upsert": 6 + 10, "reindex": 0}
    reindex = jobs.create(collection="c", kind=JobKind.REINDEX, payload=[{}])
    jobs.progress(reindex.id, 5, 7)
    jobs.finish(reindex.id, JobStatus.SUCCEEDED)  # shown done in full (7 of 7), which indexed nothing more
    assert (jobs.get(reindex.id).done, jobs.get(reindex.id).total) == (7, 7)
    deleted = jobs.create(collection="c", kind=JobKind.DELETE, payload=["a", "b"])
    jobs.progress(deleted.id, 2, 2)  # documents removed, not indexed
    assert jobs.counts().documents == {"upsert": 16, "reindex": 5}


def test_a_store_from_before_the_totals_gets_them_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    jobs = JobStore(path)
    old = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{}])
    jobs.finish(old.id, JobStatus.SUCCEEDED)
    with sqlite3.connect(path) as conn:  # as an older version left it: no totals, no triggers
        conn.executescript(
            "DROP TRIGGER jobs_count_finished; DROP TRIGGER jobs_count_progress; "
            "DROP TABLE jobs_finished; DROP TABLE documents_indexed;"
        )
    jobs = JobStore(path)
    assert jobs.counts().finished == {}
    assert jobs.counts().by_status[("upsert", "succeeded")] == 1  # the jobs themselves are all there
    new = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{}])
    jobs.finish(new.id, JobStatus.SUCCEEDED)
    assert jobs.counts().finished == {("upsert", "succeeded"): 1}
