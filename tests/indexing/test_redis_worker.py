"""The production path: a real redis-server, the API, and two `vela worker` processes, one of them SIGKILLed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from tests.service.conftest import _free_port, running_server, wait_job


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed: `make install` installs it (apt-get install redis-server)")
    port = _free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.time() + 10
    while True:
        try:
            if redis.Redis.from_url(url).ping():
                break
        except redis.ConnectionError:
            assert time.time() < deadline, "redis-server did not start"
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(10)


def _worker(name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "worker", "--name", name],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def ingest_with_a_killed_worker(tmp_path: Path, redis_url: str, embedder: Path, n_docs: int) -> None:
    env = {
        **os.environ,
        "VELA_REDIS_URL": redis_url,
        "VELA_DATA_DIR": str(tmp_path / "data"),
        "VELA_EMBEDDER": str(embedder),
        "VELA_CLAIM_IDLE_S": "2",
        "VELA_INGEST_BATCH_SIZE": "20",
    }
    workers = {name: _worker(name, env) for name in ("w1", "w2")}
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
    finally:
        for p in workers.values():
            p.kill()
            p.wait(10)


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
