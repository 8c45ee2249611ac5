"""A running job whose worker died is run again even when Redis lost its stream entry (no pending entry is left for
a takeover): the workers' look for lost jobs queues again every running job whose lease expired that no entry
names. With the entry still there, the takeover runs it and the look leaves it alone; a live worker's job is never
run again, through a Redis that lost everything included. Real redis-server, real `vela worker` processes."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.redis_queue import GROUP, RedisJobQueue, requeue_abandoned, stream_job_ids
from indexing.redis_worker import RedisWorker
from tests.redis_fixtures import RedisServer, start_worker, until, worker_env, worker_logs
from tests.service.conftest import running_server, wait_job
from velaio.files import file_lock

STREAM = "vela:jobs"
GONE = "running jobs whose worker is gone: queued again"  # the log line of a job queued again


def _client(server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


def _expire(path: Path, job_id: str) -> None:
    """The lease as a worker that died an hour ago left it."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE jobs SET lease_until = lease_until - 3600 WHERE id = ?", (job_id,))


def _running(dead: JobStore, n: int = 1) -> list[str]:
    ids = [dead.create(collection="c", kind=JobKind.DELETE, payload=["x"]).id for _ in range(n)]
    for job_id in ids:
        dead.start(job_id, "dead")
    return ids


def test_only_an_expired_running_job_that_no_entry_names_is_queued_again(redis_server: RedisServer, tmp_path: Path):
    client = _client(redis_server)
    path = tmp_path / "jobs.sqlite3"
    dead, alive, cli = JobStore(path, lease_s=60), JobStore(path, lease_s=60), JobStore(path)
    queue = RedisJobQueue(redis_server.url, jobs=dead)
    queue.start()
    lost, pending = _running(dead, 2)
    queue.resubmit(pending)
    client.xreadgroup(GROUP, "dead", {STREAM: ">"}, count=1)  # delivered to the worker that died: pending
    (live,) = _running(alive)  # a live worker's job, whose entry Redis lost
    unleased = cli.create(collection="c", kind=JobKind.DELETE, payload=["x"], running_in="cli").id
    ended = _running(dead)[0]
    dead.finish(ended, JobStatus.SUCCEEDED)
    for job_id in (lost, pending, ended):
        _expire(path, job_id)

    assert requeue_abandoned(client, STREAM, dead) == [lost]
    assert dead.get(lost).status == JobStatus.QUEUED
    assert stream_job_ids(client, STREAM) == {pending, lost}  # the pending one is left to the takeover
    assert {j: dead.get(j).status for j in (pending, live, unleased)} == dict.fromkeys(
        (pending, live, unleased), JobStatus.RUNNING
    )
    assert requeue_abandoned(client, STREAM, dead) == []  # nothing twice


@contextmanager
def serving(server: RedisServer, jobs: JobStore, ran: list[str]) -> Iterator[None]:
    """An in-process worker that looks for lost jobs twice a second, and ends the jobs it runs at once."""

    def run(job_id: str, _heartbeat: Any) -> None:
        if jobs.get(job_id).status == JobStatus.QUEUED:
            jobs.start(job_id, "w")
            jobs.finish(job_id, JobStatus.SUCCEEDED)
            ran.append(job_id)

    worker = RedisWorker(server.url, run, name="w", claim_idle_s=3600, block_s=0.1, jobs=jobs, requeue_every_s=0.5)
    stop = threading.Event()
    thread = threading.Thread(target=worker.serve, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive()


def test_a_running_worker_runs_a_job_whose_worker_died_on_its_periodic_look(redis_server: RedisServer, tmp_path):
    client = _client(redis_server)
    path = tmp_path / "jobs.sqlite3"
    jobs = JobStore(path, lease_s=60)
    RedisJobQueue(redis_server.url, jobs=jobs).start()
    ran: list[str] = []
    with serving(redis_server, jobs, ran):
        until("the worker is registered", lambda: bool(client.xinfo_consumers(STREAM, GROUP)))
        (abandoned,) = _running(JobStore(path, lease_s=60))  # a worker that died; its entry is gone
        _expire(path, abandoned)
        until("the abandoned job ran", lambda: ran == [abandoned], timeout=30)
        assert jobs.get(abandoned).attempts == 2
        until("its entry is gone", lambda: client.xlen(STREAM) == 0)


def _lease(data: Path, job_id: str) -> tuple[float, float]:
    """The job's start time and lease expiry, as its worker wrote them."""
    with sqlite3.connect(data / "jobs.sqlite3") as conn:
        started, until_ = conn.execute("SELECT started_at, lease_until FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return float(started), float(until_)


def _lease_over(data: Path, job_id: str) -> bool:
    return _lease(data, job_id)[1] < time.time()


def _index(api: httpx.Client, collection: str, doc_id: str) -> str:
    r = api.post("/index", json={"collection": collection, "documents": [{"id": doc_id, "text": f"{doc_id} text"}]})
    assert r.status_code == 202, r.text
    return str(r.json()["job_id"])


def _running_at_the_lock(api: httpx.Client, locks: ExitStack, data: Path, env: dict[str, str]) -> str:
    """A write to collection `a` that its worker marked running and that waits for the writer lock held here."""
    assert wait_job(api, _index(api, "a", "first"), timeout=180)["status"] == "succeeded", worker_logs(env)
    locks.enter_context(file_lock(data / "collections" / "a" / "write.lock"))
    job_id = _index(api, "a", "second")
    until("the write runs", lambda: api.get(f"/jobs/{job_id}").json()["status"] == "running", timeout=180)
    return job_id


def _kill(worker: subprocess.Popen[bytes]) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)


def _queued_long_ago(data: Path, collection: str) -> str:
    """A delete recorded a minute ago whose stream entry Redis lost (it never reached the stream)."""
    job_id = JobStore(data / "jobs.sqlite3").create(collection=collection, kind=JobKind.DELETE, payload=["x"]).id
    with sqlite3.connect(data / "jobs.sqlite3") as conn:
        conn.execute("UPDATE jobs SET created_at = created_at - 60 WHERE id = ?", (job_id,))
    return job_id


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


def _consumers(client: redis.Redis) -> set[str]:
    return {str(c["name"]) for c in client.xinfo_consumers(STREAM, GROUP)}


@pytest.mark.slow  # the takeover itself is in the default suite (test_redis_worker.py); this adds the look
def test_a_dead_workers_job_whose_entry_is_kept_is_taken_over_not_queued_again(
    tmp_path: Path, redis_server: RedisServer, tiny_embedder_dir: Path, stack: ExitStack
) -> None:
    """The entry is pending for the dead worker: the look sees the expired lease and leaves the job to the takeover
    (XAUTOCLAIM after VELA_CLAIM_IDLE_S), which runs it once more."""
    env = worker_env(tmp_path, redis_server.url, tiny_embedder_dir)
    data, client = tmp_path / "data", _client(redis_server)
    api = stack.enter_context(running_server(data, redis_url=redis_server.url, embedder=str(tiny_embedder_dir)))
    w1 = start_worker("w1", env)
    stack.callback(_kill, w1)
    assert wait_job(api, _index(api, "b", "kept"), timeout=180)["status"] == "succeeded", worker_logs(env)
    with ExitStack() as locks:
        job_id = _running_at_the_lock(api, locks, data, env)
        _kill(w1)
    until("w1's lease is over", lambda: _lease_over(data, job_id), 60)
    # A job queued a minute ago whose entry Redis lost: the look w2 runs as it registers (before it reads the
    # stream) adds it, so its end shows that look ran, and saw the expired lease.
    lost_queued = _queued_long_ago(data, "b")
    client.delete(f"{STREAM}:requeue")  # as if the period were over: the next worker looks as it registers
    w2 = start_worker("w2", env)
    stack.callback(_kill, w2)
    job = wait_job(api, job_id, timeout=180)
    assert (job["status"], job["worker"], job["attempts"]) == ("succeeded", "w2", 2), worker_logs(env)
    assert wait_job(api, lost_queued, timeout=120)["status"] == "succeeded", worker_logs(env)
    assert GONE not in worker_logs(env) and "took over a stalled job" in (data.parent / "w2.log").read_text()
    until("the stream holds nothing", lambda: client.xlen(STREAM) == 0)


def test_a_live_workers_job_is_never_run_again_and_a_dead_ones_is_though_redis_lost_it(
    tmp_path: Path, redis_server: RedisServer, tiny_embedder_dir: Path, stack: ExitStack
) -> None:
    # A lease of 4 s (VELA_CLAIM_IDLE_S), renewed every 1.3 s: a busy machine does not make a live worker miss it.
    env = {**worker_env(tmp_path, redis_server.url, tiny_embedder_dir), "VELA_CLAIM_IDLE_S": "4"}
    data, client, claim_s = tmp_path / "data", _client(redis_server), float(env["VELA_CLAIM_IDLE_S"])
    api = stack.enter_context(running_server(data, redis_url=redis_server.url, embedder=str(tiny_embedder_dir)))
    workers = {name: start_worker(name, env) for name in ("w1", "w2")}  # both up before the lock is held below
    for worker in workers.values():
        stack.callback(_kill, worker)
    until("both workers are registered", lambda: _consumers(client) >= set(workers), 180)
    assert wait_job(api, _index(api, "b", "kept"), timeout=180)["status"] == "succeeded", worker_logs(env)
    locks = stack.enter_context(ExitStack())
    job_id = _running_at_the_lock(api, locks, data, env)
    runner = api.get(f"/jobs/{job_id}").json()["worker"]
    (other,) = set(workers) - {runner}
    # Running for longer than its first lease: its worker renewed it (else it would have expired).
    until("the first lease is past", lambda: _lease(data, job_id)[0] + 2 * claim_s < _lease(data, job_id)[1], 60)

    # Redis loses everything while the runner is alive. The other worker makes the group again and looks at once:
    # the queued job recorded here (its entry lost too) runs, which shows the look ran; the running job is left.
    lost_queued = JobStore(data / "jobs.sqlite3").create(collection="b", kind=JobKind.DELETE, payload=["x"]).id
    client.flushall()
    assert wait_job(api, lost_queued, timeout=120)["status"] == "succeeded", worker_logs(env)
    job = api.get(f"/jobs/{job_id}").json()
    assert (job["status"], job["worker"], job["attempts"]) == ("running", runner, 1), worker_logs(env)
    assert GONE not in worker_logs(env)

    # The runner dies; Redis has no entry for its job (lost above). Once the lease expired, the other worker's next
    # look runs it again: Redis restarted empty again, so that worker makes the group again and looks at once.
    _kill(workers[runner])
    locks.close()
    until("the dead worker's lease is over", lambda: _lease_over(data, job_id), 60)
    client.flushall()
    job = wait_job(api, job_id, timeout=180)
    assert (job["status"], job["worker"], job["attempts"]) == ("succeeded", other, 2), worker_logs(env)
    assert GONE in (data.parent / f"{other}.log").read_text()
    assert api.get("/collections/a/documents/second").status_code == 200
    until("the stream holds nothing", lambda: client.xlen(STREAM) == 0)
