"""The production path: a real redis-server, the API, and two `vela worker` processes, one of them SIGKILLed."""

from __future__ import annotations

import signal
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import redis

from tests.redis_fixtures import RedisServer, start_worker, worker_env, worker_logs
from tests.service.conftest import running_server, wait_job
from velaio.files import file_lock


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


def ingest_with_a_killed_worker(tmp_path: Path, redis_url: str, embedder: Path, n_docs: int) -> None:
    env = worker_env(tmp_path, redis_url, embedder)
    workers = {name: start_worker(name, env) for name in ("w1", "w2")}
    try:
        with running_server(
            tmp_path / "data", redis_url=redis_url, embedder=str(embedder), max_batch_documents=n_docs
        ) as client:
            docs = [{"id": f"d{i}", "text": f"document {i} carries the marker mk{i}z"} for i in range(n_docs)]
            r = client.post("/index", json={"collection": "big", "documents": docs})
            assert r.status_code == 202
            job_id = r.json()["job_id"]
            killed = _kill_at(client, job_id, workers, fraction=0.3)
            job = wait_job(client, job_id, timeout=600)
            assert job["status"] == "succeeded" and job["attempts"] >= 2, job
            assert job["worker"] != killed and job["done"] == n_docs
            info = client.get("/collections/big").json()
            assert info["documents"] == n_docs and info["passages"] == n_docs  # no duplicate passages
            _every_document_is_searchable(client, n_docs)
            _wait_stream_drained(redis_url)
    finally:
        for p in workers.values():
            p.kill()
            p.wait(10)


def _wait_stream_drained(redis_url: str) -> None:
    """The killed worker's entry stayed pending until taken over; once its job ended it was acknowledged and
    deleted: the stream holds no job that is done."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    deadline = time.time() + 60
    while client.xlen("vela:jobs") or client.xpending("vela:jobs", "vela-workers")["pending"]:
        assert time.time() < deadline, client.xrange("vela:jobs")
        time.sleep(0.05)


def _kill_at(client: httpx.Client, job_id: str, workers: dict[str, subprocess.Popen[bytes]], fraction: float) -> str:
    deadline = time.time() + 300
    while time.time() < deadline:
        job = client.get(f"/jobs/{job_id}").json()
        if job["status"] == "running" and job["done"] >= fraction * job["total"]:
            name = job["worker"]
            workers[name].send_signal(signal.SIGKILL)
            workers[name].wait(10)
            after = client.get(f"/jobs/{job_id}").json()
            assert after["done"] < after["total"], "the job finished before the kill: make it longer"
            return str(name)
        time.sleep(0.01)
    raise TimeoutError("job never reached the kill point")


def _every_document_is_searchable(client: httpx.Client, n_docs: int) -> None:
    for start in range(0, n_docs, 256):
        ids = range(start, min(start + 256, n_docs))
        r = client.post(
            "/search/batch",
            json={"collection": "big", "queries": [f"mk{i}z" for i in ids], "mode": "bm25", "k": 2},
        )
        for i, res in zip(ids, r.json()["results"], strict=True):
            assert [h["id"] for h in res["hits"]] == [f"d{i}"]


def test_sigkilled_worker_job_is_taken_over_and_completes(
    tmp_path: Path, redis_url: str, tiny_embedder_dir: Path
) -> None:
    ingest_with_a_killed_worker(tmp_path, redis_url, tiny_embedder_dir, n_docs=3000)


@pytest.mark.slow
def test_sigkill_during_a_20k_ingest(tmp_path: Path, redis_url: str, tiny_embedder_dir: Path) -> None:
    ingest_with_a_killed_worker(tmp_path, redis_url, tiny_embedder_dir, n_docs=20_000)


def test_a_job_survives_a_redis_restart(tmp_path: Path, redis_server: RedisServer, tiny_embedder_dir: Path) -> None:
    env = worker_env(tmp_path, redis_server.url, tiny_embedder_dir)
    docs = [{"id": f"d{i}", "text": f"text {i} with marker mk{i}z"} for i in range(300)]
    with running_server(tmp_path / "data", redis_url=redis_server.url, embedder=str(tiny_embedder_dir)) as client:
        # Queued while no worker runs; Redis restarts (AOF) before any worker reads it.
        job_id = client.post("/index", json={"collection": "a", "documents": docs}).json()["job_id"]
        redis_server.stop()
        redis_server.start()
        worker = start_worker("w1", env)
        try:
            assert wait_job(client, job_id, timeout=300)["status"] == "succeeded"
        finally:
            worker.kill()
            worker.wait(10)
        assert client.get("/collections/a").json()["documents"] == 300


@pytest.mark.slow  # `make test-slow`: the default suite keeps under 15 minutes
def test_different_collections_index_in_parallel(
    tmp_path: Path, redis_server: RedisServer, tiny_embedder_dir: Path
) -> None:
    env = worker_env(tmp_path, redis_server.url, tiny_embedder_dir)
    workers = [start_worker(name, env) for name in ("w1", "w2")]
    client_redis = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        deadline = time.time() + 120
        while True:  # both workers are waiting on the stream
            try:
                consumers = {c["name"] for c in client_redis.xinfo_consumers("vela:jobs", "vela-workers")}
            except redis.ResponseError:
                consumers = set()
            if consumers >= {"w1", "w2"}:
                break
            exited = [p.returncode for p in workers if p.poll() is not None]
            assert not exited and time.time() < deadline, f"workers did not start ({exited=}):\n{worker_logs(env)}"
            time.sleep(0.1)
        docs = [{"id": f"d{i}", "text": f"text {i} with marker mk{i}z"} for i in range(1500)]
        with running_server(tmp_path / "data", redis_url=redis_server.url, embedder=str(tiny_embedder_dir)) as client:
            for c in "ab":  # both collections exist, so that the test can hold their writer locks
                first = client.post("/index", json={"collection": c, "documents": docs[:1]}).json()["job_id"]
                assert wait_job(client, first, timeout=300)["status"] == "succeeded"
            with ExitStack() as locks:
                # Each job stops at its collection's writer lock, held here, after its worker marked it running:
                # both running at once shows two workers took them (a job of 1500 tiny documents ends in a
                # fraction of a second, too soon to overlap by chance).
                for c in "ab":
                    locks.enter_context(file_lock(tmp_path / "data" / "collections" / c / "write.lock"))
                ids = [client.post("/index", json={"collection": c, "documents": docs}).json()["job_id"] for c in "ab"]
                deadline = time.time() + 120
                while {client.get(f"/jobs/{j}").json()["status"] for j in ids} != {"running"}:
                    assert time.time() < deadline, f"both jobs never ran at once:\n{worker_logs(env)}"
                    time.sleep(0.05)
            a, b = (wait_job(client, j, timeout=300) for j in ids)
            assert a["status"] == b["status"] == "succeeded"
            # One writer per collection, but two collections at the same time on two workers.
            assert {a["worker"], b["worker"]} == {"w1", "w2"}
            for c in "ab":
                assert client.get(f"/collections/{c}").json()["documents"] == 1500
    finally:
        for p in workers:
            p.kill()
            p.wait(10)
