"""The job store: one-at-a-time creation from many threads at once, a limit on queued jobs that holds across
processes, and an ended job's status kept final."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from indexing.jobs import GENERATION_KINDS, Job, JobKind, JobStatus, JobStore, end_job


class Full(Exception):
    pass


def test_only_one_of_many_simultaneous_generation_jobs_is_created(tmp_path: Path) -> None:
    jobs = JobStore(tmp_path / "jobs.sqlite3")

    def submit(_: int) -> Job | str:
        return JobStore(tmp_path / "jobs.sqlite3").create_unless_unfinished(
            collection="c", kind=JobKind.REINDEX, payload=[{}], kinds=GENERATION_KINDS
        )

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(submit, range(16)))
    created = [a for a in answers if isinstance(a, Job)]
    assert len(created) == 1 and all(a == created[0].id for a in answers if isinstance(a, str))
    # Another collection, or another kind of job, is not held back; a finished one holds nothing back.
    assert isinstance(
        jobs.create_unless_unfinished(collection="d", kind=JobKind.REINDEX, payload=[{}], kinds=GENERATION_KINDS), Job
    )
    assert jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{}]).status == JobStatus.QUEUED
    jobs.start(created[0].id)
    jobs.finish(created[0].id, JobStatus.SUCCEEDED)
    assert isinstance(
        jobs.create_unless_unfinished(collection="c", kind=JobKind.PROMOTE, payload=[{}], kinds=GENERATION_KINDS), Job
    )


def test_an_ended_jobs_status_and_result_are_final_until_a_retry(tmp_path: Path) -> None:
    """A second run of a job (an entry delivered twice) that ends after the first changes nothing: not a succeeded
    job to failed, not its result. POST /jobs/{id}/retry (requeue) still takes a failed job back."""
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    done = jobs.create(collection="c", kind=JobKind.REINDEX, payload=[{"embedder": "x"}])
    jobs.start(done.id, "w2")
    assert jobs.finish(done.id, JobStatus.SUCCEEDED, result={"generation": 1, "promoted": True})
    ended = jobs.get(done.id)
    jobs.start(done.id, "w1")  # the other run's start, which found it ended: nothing changes
    assert not jobs.finish(done.id, JobStatus.FAILED, error="RuntimeError: the serving generation changed")
    jobs.set_result(done.id, {"generation": 1, "documents": {"embedded": 0, "copied": 0}})
    assert jobs.get(done.id) == ended
    assert ended.status == JobStatus.SUCCEEDED and ended.error is None
    assert ended.result == {"generation": 1, "promoted": True}
    assert end_job(jobs, done.id, JobStatus.FAILED, "late") == JobStatus.SUCCEEDED  # what the job holds

    cancelled = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{"id": "a", "text": "t"}])
    jobs.request_cancel(cancelled.id)
    assert not jobs.finish(cancelled.id, JobStatus.SUCCEEDED)
    assert jobs.get(cancelled.id).status == JobStatus.CANCELLED

    failed = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{"id": "a", "text": "t"}])
    jobs.start(failed.id)
    assert jobs.finish(failed.id, JobStatus.FAILED, error="OSError: disk full")
    assert not jobs.finish(failed.id, JobStatus.SUCCEEDED)
    assert jobs.get(failed.id).status == JobStatus.FAILED
    requeued = jobs.requeue(failed.id)  # the retry: queued, and without the earlier run's error
    assert requeued.status == JobStatus.QUEUED and requeued.error is None and requeued.started_at is None
    jobs.start(failed.id)
    assert jobs.finish(failed.id, JobStatus.SUCCEEDED)
    assert jobs.get(failed.id).status == JobStatus.SUCCEEDED and jobs.get(failed.id).attempts == 2


def test_a_limit_on_unfinished_jobs_holds_when_many_stores_queue_at_once(tmp_path: Path) -> None:
    # Each store stands for a process: its admission counts the unfinished jobs, and the count and the insert are
    # one transaction, so 16 writers racing for the last 5 places make exactly 5 jobs.
    limit = 5

    def store() -> JobStore:
        jobs = JobStore(tmp_path / "jobs.sqlite3")

        def admit() -> None:
            if jobs.unfinished_count() >= limit:
                raise Full()

        jobs.admit = admit
        return jobs

    def submit(_: int) -> bool:
        try:
            store().create(collection="c", kind=JobKind.UPSERT, payload=[{}])
        except Full:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(submit, range(16)))
    assert sum(made) == limit
    assert JobStore(tmp_path / "jobs.sqlite3").unfinished_count() == limit
