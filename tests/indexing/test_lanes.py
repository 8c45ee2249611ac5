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
