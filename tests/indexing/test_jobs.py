"""The job store's one-at-a-time creation, from many threads at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from indexing.jobs import GENERATION_KINDS, Job, JobKind, JobStatus, JobStore


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
