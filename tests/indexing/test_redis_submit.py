"""What the API's RedisJobQueue.submit does when Redis does not answer: the job is failed and QueueUnavailable
raised, unless a worker has the job already (the XADD got through and only its reply was lost)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.queue import QueueUnavailable
from indexing.redis_queue import RedisJobQueue
from tests.service.conftest import _free_port


@pytest.fixture
def jobs(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "jobs.sqlite3")


def _down_queue(jobs: JobStore) -> RedisJobQueue:
    return RedisJobQueue(f"redis://127.0.0.1:{_free_port()}/0", jobs=jobs)  # nothing listens there


def test_a_job_that_could_not_be_queued_is_failed(jobs: JobStore) -> None:
    job = jobs.create(collection="c", kind=JobKind.UPSERT, payload=[{"id": "p", "text": "20 dollars"}])
    queue = _down_queue(jobs)
    with pytest.raises(QueueUnavailable) as raised:
        queue.submit(job.id)
    assert raised.value.job_id == job.id and raised.value.retry_after_s > 0
    failed = jobs.get(job.id)
    assert failed.status == JobStatus.FAILED and failed.attempts == 0
    assert failed.error is not None and "job queue could not be reached" in failed.error
    assert "127.0.0.1" not in failed.error  # the error is shown by GET /jobs/{id}: no host, port or password
    assert jobs.unfinished() == []  # the start-up hand-over will not see it
    assert not queue.reachable()


def test_a_job_a_worker_already_took_is_left_alone(jobs: JobStore) -> None:
    job = jobs.create(collection="c", kind=JobKind.DELETE, payload=["p"])
    jobs.start(job.id, "w1")  # the XADD reached Redis; only its reply was lost
    _down_queue(jobs).submit(job.id)  # no error: the job is in the queue
    assert jobs.get(job.id).status == JobStatus.RUNNING


def test_the_start_up_hand_over_never_fails_a_job(jobs: JobStore) -> None:
    job = jobs.create(collection="c", kind=JobKind.DELETE, payload=["p"])
    with pytest.raises(redis.ConnectionError):
        _down_queue(jobs).hand_over()
    assert jobs.get(job.id).status == JobStatus.QUEUED
