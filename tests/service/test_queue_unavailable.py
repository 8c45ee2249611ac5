"""Redis mode with Redis stopped: a write the API cannot queue is refused with a retryable 503, its job is failed,
and nothing applies it later (not the start-up hand-over, not a worker reading an entry whose reply was lost)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import redis
from vela_client import routes
from vela_client.retry import RetryPolicy, retry_delay

from indexing.redis_queue import GROUP
from tests.redis_fixtures import RedisServer, start_worker, worker_env, worker_logs
from tests.service.conftest import running_server, wait_job


def _index(client: httpx.Client, doc_id: str, text: str) -> httpx.Response:
    return client.post("/index", json={"collection": "prices", "documents": [{"id": doc_id, "text": text}]})


def _jobs(data: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(data / "jobs.sqlite3") as conn:
        conn.row_factory = sqlite3.Row
        return [
            dict(r)
            for r in conn.execute("SELECT id, collection, status, error, attempts FROM jobs ORDER BY created_at")
        ]


def _wait_queue(client: httpx.Client, state: str) -> dict[str, Any]:
    deadline = time.time() + 60
    while True:
        r = client.get("/readyz")
        assert r.status_code == 200, r.text
        if r.json()["queue"] == state:
            return dict(r.json())
        assert time.time() < deadline, f"/readyz never showed queue {state!r}: {r.json()}"
        time.sleep(0.1)


def test_a_write_that_could_not_be_queued_is_refused_and_never_applied(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    env = worker_env(tmp_path, server.url, tiny_embedder_dir)
    data = tmp_path / "data"
    worker = start_worker("w1", env)
    options: dict[str, Any] = {"redis_url": server.url, "embedder": str(tiny_embedder_dir)}
    try:
        with running_server(data, **options) as client:
            first = _index(client, "p", "10 dollars")
            assert first.status_code == 202, first.text
            assert wait_job(client, first.json()["job_id"], timeout=300)["status"] == "succeeded", worker_logs(env)

            server.stop()
            refused = _index(client, "p", "20 dollars")
            assert refused.status_code == 503, refused.text
            error = refused.json()["error"]
            assert error["code"] == "queue_unavailable" and error["request_id"]
            assert "nothing was written" in error["message"]
            assert int(refused.headers["Retry-After"]) > 0
            # Nor is a collection the refused write would have made.
            made = client.post("/index", json={"collection": "never-made", "documents": [{"id": "a", "text": "x"}]})
            assert made.status_code == 503, made.text
            assert client.get("/collections/never-made").status_code == 404
            assert "never-made" not in [c["name"] for c in client.get("/collections").json()["collections"]]
            # The Python client sends it again after the Retry-After it was given.
            policy = RetryPolicy()
            assert retry_delay(policy, routes.INDEX, 1, response=refused) == float(refused.headers["Retry-After"])
            # Searches go on: the process stays ready, and says the queue is away (no URL, no port).
            ready = _wait_queue(client, "unreachable")
            assert str(server.port) not in str(ready) and "redis" not in str(ready).lower()

            stale = [j for j in _jobs(data) if j["status"] == "failed" and j["collection"] != "never-made"]
            assert len(stale) == 1, _jobs(data)
            stale_id = stale[0]["id"]
            job = client.get(f"/jobs/{stale_id}").json()
            assert job["status"] == "failed" and job["attempts"] == 0
            assert "job queue could not be reached" in job["error"] and "nothing was written" in job["error"]
            assert all(j["status"] != "queued" for j in _jobs(data))

            server.start()
            _wait_queue(client, "ok")
            # The XADD may have reached Redis with only its reply lost: its entry then sits in the stream. The
            # worker must skip the failed job it names.
            redis.Redis.from_url(server.url).xadd("vela:jobs", {"job_id": stale_id})
            newer = _index(client, "p", "30 dollars")
            assert newer.status_code == 202, newer.text
            assert wait_job(client, newer.json()["job_id"], timeout=300)["status"] == "succeeded", worker_logs(env)

        # A restart hands over every job still queued: the refused one is not among them.
        with running_server(data, **options) as client:
            marker = _index(client, "q", "a later write")
            assert marker.status_code == 202, marker.text
            # One worker takes the stream in order: once this job is done, anything handed over before it ran.
            assert wait_job(client, marker.json()["job_id"], timeout=300)["status"] == "succeeded", worker_logs(env)
            assert client.get("/collections/prices/documents/p").json()["text"] == "30 dollars"
            job = client.get(f"/jobs/{stale_id}").json()
            assert job["status"] == "failed" and job["attempts"] == 0, job
            _wait_stream_empty(server.url)
    finally:
        worker.kill()
        worker.wait(10)
        server.stop()


def _wait_stream_empty(url: str) -> None:
    """Every entry, the stale one included, was acknowledged and deleted: nothing is left to run."""
    client = redis.Redis.from_url(url, decode_responses=True)
    deadline = time.time() + 60
    while client.xlen("vela:jobs") or client.xpending("vela:jobs", GROUP)["pending"]:
        assert time.time() < deadline, client.xrange("vela:jobs")
        time.sleep(0.05)


def test_every_write_is_refused_alike_and_queued_jobs_are_handed_over_again(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    """No worker runs: a job queued before Redis went away stays queued and is handed over again at the next
    start; the writes sent while it was away (a delete, a retry of a failed job) are each refused and failed."""
    server = RedisServer(tmp_path)
    server.start()
    data = tmp_path / "data"
    options: dict[str, Any] = {"redis_url": server.url, "embedder": str(tiny_embedder_dir)}
    try:
        with running_server(data, **options) as client:
            queued = _index(client, "a", "queued before the outage")
            assert queued.status_code == 202, queued.text
            server.stop()
            deleted = client.delete("/collections/prices/documents/a")
            assert deleted.status_code == 503 and deleted.json()["error"]["code"] == "queue_unavailable"
            assert deleted.headers["Retry-After"].isdigit()
            (failed,) = [j["id"] for j in _jobs(data) if j["status"] == "failed" and j["collection"] != "never-made"]
            retried = client.post(f"/jobs/{failed}/retry")
            assert retried.status_code == 503 and retried.json()["error"]["code"] == "queue_unavailable"
            assert client.get(f"/jobs/{failed}").json()["status"] == "failed"
            assert client.get(f"/jobs/{queued.json()['job_id']}").json()["status"] == "queued"
            server.start()
        back = redis.Redis.from_url(server.url, decode_responses=True)
        stream: Any = back.xrange("vela:jobs")
        assert [fields["job_id"] for _, fields in stream] == [queued.json()["job_id"]]  # added by the request
        back.xtrim("vela:jobs", maxlen=0, approximate=False)  # and lost by Redis (the last second of its AOF)
        with running_server(data, **options):
            stream = back.xrange("vela:jobs")
            handed = [fields["job_id"] for _, fields in stream]
            # Once more by the start-up, which adds what the stream does not hold; the refused delete never.
            assert handed == [queued.json()["job_id"]], handed
    finally:
        server.stop()
