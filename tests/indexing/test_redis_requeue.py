"""A job accepted (recorded queued) whose stream entry Redis lost (restarted without persistence, an everysec AOF
that lost its last second) is added again and run, without restarting anything: by the workers, every period and
at once when they have to make the consumer group again, and by the API's start-up hand-over."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.redis_queue import GROUP, RedisJobQueue, requeue_lost, stream_job_ids
from indexing.redis_worker import RedisWorker
from tests.redis_fixtures import RedisServer, start_worker, until, worker_env, worker_logs
from tests.service.conftest import running_server, wait_job

STREAM = "vela:jobs"


@pytest.fixture
def jobs(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "jobs.sqlite3")


def _client(server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


def _recorded(jobs: JobStore, seconds_ago: float = 0.0) -> str:
    """A job recorded as queued `seconds_ago`, as the API records one before its XADD."""
    job = jobs.create(collection="c", kind=JobKind.DELETE, payload=["x"])
    jobs._conn().execute("UPDATE jobs SET created_at = created_at - ? WHERE id = ?", (seconds_ago, job.id))
    return job.id


def _entries(client: redis.Redis) -> list[str]:
    entries: Any = client.xrange(STREAM)
    return [str(fields["job_id"]) for _, fields in entries]


@contextmanager
def serving(server: RedisServer, jobs: JobStore, ran: list[str], *, requeue_every_s: float) -> Iterator[RedisWorker]:
    """An in-process worker whose jobs end at once, as a worker's run ends them in the job store."""

    def run(job_id: str, _heartbeat: Any) -> None:
        if jobs.get(job_id).status == JobStatus.QUEUED:
            jobs.start(job_id, "w")
            jobs.finish(job_id, JobStatus.SUCCEEDED)
            ran.append(job_id)

    worker = RedisWorker(
        server.url, run, name="w", claim_idle_s=3600, block_s=0.1, jobs=jobs, requeue_every_s=requeue_every_s
    )
    stop = threading.Event()
    thread = threading.Thread(target=worker.serve, args=(stop,), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive()


def test_requeue_lost_adds_only_queued_jobs_no_entry_names(redis_server: RedisServer, jobs: JobStore) -> None:
    client = _client(redis_server)
    queue = RedisJobQueue(redis_server.url, jobs=jobs)
    queue.start()
    lost = _recorded(jobs, 120)
    queue.submit(lost)
    client.xdel(STREAM, *(entry for entry, _ in client.xrange(STREAM)))  # Redis lost its entry
    waiting = _recorded(jobs, 120)
    queue.submit(waiting)  # its entry is there, not yet delivered
    pending = _recorded(jobs, 120)
    queue.submit(pending)
    client.xreadgroup(GROUP, "dead", {STREAM: ">"}, count=2)  # delivered to a worker that died: pending
    assert client.xpending(STREAM, GROUP)["pending"] == 2
    never_added = _recorded(jobs, 120)  # the API died between recording it and its XADD
    ended = _recorded(jobs, 120)
    jobs.finish(ended, JobStatus.SUCCEEDED)
    young = _recorded(jobs, 0)  # its XADD may be on its way

    assert requeue_lost(client, STREAM, jobs, queued_for_s=30) == [lost, never_added]
    assert sorted(_entries(client)) == sorted([waiting, pending, lost, never_added])
    assert requeue_lost(client, STREAM, jobs, queued_for_s=30) == []  # the stream names them all now
    assert requeue_lost(client, STREAM, jobs, queued_for_s=0) == [young]
    assert stream_job_ids(client, STREAM) == {waiting, pending, lost, never_added, young}


def test_a_job_whose_entry_was_deleted_is_run_by_a_running_worker(redis_server: RedisServer, jobs: JobStore) -> None:
    client = _client(redis_server)
    queue = RedisJobQueue(redis_server.url, jobs=jobs)
    queue.start()
    ran: list[str] = []
    with serving(redis_server, jobs, ran, requeue_every_s=1.0):
        until("the worker is registered", lambda: bool(client.xinfo_consumers(STREAM, GROUP)))
        first = _recorded(jobs)
        queue.submit(first)
        until("the first job ran", lambda: ran == [first], timeout=30)
        until("its entry is gone", lambda: client.xlen(STREAM) == 0)
        # The next job's entry is added and gone before any worker reads it, as Redis losing its last writes.
        lost = _recorded(jobs)
        gone = client.pipeline(transaction=True)
        gone.xadd(STREAM, {"job_id": lost})
        gone.xtrim(STREAM, maxlen=0, approximate=False)
        gone.execute()
        started = time.monotonic()
        until("the lost job ran", lambda: ran == [first, lost], timeout=30)
        # Queued for longer than a period, then added again within the next one (with 0.1 s reads).
        assert time.monotonic() - started < 10
        assert jobs.get(lost).status == JobStatus.SUCCEEDED
        until("the stream is empty", lambda: client.xlen(STREAM) == 0)
        time.sleep(2.5)  # two more periods: nothing is added again
        assert ran == [first, lost] and client.xlen(STREAM) == 0


def test_after_flushall_the_worker_makes_the_group_again_and_runs_the_queued_jobs_at_once(
    redis_server: RedisServer, jobs: JobStore
) -> None:
    """A period of an hour: what runs the lost jobs is the worker making the group again, not its periodic look."""
    client = _client(redis_server)
    queue = RedisJobQueue(redis_server.url, jobs=jobs)
    queue.start()
    ran: list[str] = []
    with serving(redis_server, jobs, ran, requeue_every_s=3600):
        until("the worker is registered", lambda: bool(client.xinfo_consumers(STREAM, GROUP)))
        recorded = _recorded(jobs)  # recorded; its entry never reaches the stream (Redis loses it below)
        time.sleep(0.5)
        assert ran == []
        client.flushall()  # Redis empty: no stream, no group (the worker is blocked reading the stream)
        until("the queued job ran", lambda: ran == [recorded], timeout=30)
        assert client.xinfo_groups(STREAM)[0]["name"] == GROUP
        queue.submit(after := _recorded(jobs))
        until("a job sent afterwards ran", lambda: ran == [recorded, after], timeout=30)


def test_the_api_start_up_hands_over_what_the_stream_does_not_hold(redis_server: RedisServer, jobs: JobStore) -> None:
    client = _client(redis_server)
    queue = RedisJobQueue(redis_server.url, jobs=jobs)
    queue.start()
    there = _recorded(jobs)
    queue.submit(there)
    missing = _recorded(jobs)
    assert queue.hand_over() == [missing]  # at start-up, whatever its age; the one the stream holds not twice
    assert _entries(client) == [there, missing]


def test_a_vela_worker_runs_a_write_redis_lost_without_a_restart(
    tmp_path: Path, redis_server: RedisServer, tiny_embedder_dir: Path
) -> None:
    """The production path: `vela serve` accepts a write while no worker runs, Redis loses everything (FLUSHALL, as
    a restart without persistence), then a `vela worker` starts: the write is applied, and the API was not
    restarted."""
    env = worker_env(tmp_path, redis_server.url, tiny_embedder_dir)
    client = _client(redis_server)
    with running_server(tmp_path / "data", redis_url=redis_server.url, embedder=str(tiny_embedder_dir)) as api:
        r = api.post("/index", json={"collection": "c", "documents": [{"id": "b", "text": "second document"}]})
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        assert client.xlen(STREAM) == 1
        client.flushall()
        worker = start_worker("w1", env)
        try:
            job = wait_job(api, job_id, timeout=180)
            assert job["status"] == "succeeded" and job["attempts"] == 1, (job, worker_logs(env))
            assert api.get("/collections/c/documents/b").status_code == 200
            assert worker.poll() is None, worker_logs(env)
        finally:
            worker.kill()
            worker.wait(10)
