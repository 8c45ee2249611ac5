"""Reindex, rollback and promote through the API with real `vela worker` processes and a real Redis, where the
worker that runs the rollback is not the one that ran the reindex.

A worker runs no background reader: it kept the generation it had opened before another worker's reindex switched
the collection, and a rollback it ran then took generation 0's writer lock twice (as the generation serving, by
its stale view, and as the one to go back to) and waited for itself for ever, its lease renewed all the while."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from indexing.redis_queue import GROUP
from models.registry import ModelRegistry
from tests.redis_fixtures import RedisServer, start_worker, until, worker_env, worker_logs
from tests.service.conftest import running_server, wait_job
from tests.tiny_models import save_tiny_bert
from velaio.files import file_lock

DOCS = [{"id": f"d{i}", "text": f"document {i} about tides and the moon, marker mk{i}z"} for i in range(60)]


@pytest.fixture
def workers() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    started: dict[str, subprocess.Popen[bytes]] = {}
    yield started
    for p in started.values():
        p.kill()
        p.wait(10)


def _registered(url: str, name: str, worker: subprocess.Popen[bytes]) -> bool:
    assert worker.poll() is None, f"worker {name} exited with {worker.returncode}"
    try:
        consumers = redis.Redis.from_url(url, decode_responses=True).xinfo_consumers("vela:jobs", GROUP)
    except redis.ResponseError:  # no stream yet
        return False
    return name in {c["name"] for c in consumers}


def _job(client: httpx.Client, path: str, body: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    r = client.post(path, json=body)
    assert r.status_code == 202, r.text
    job = wait_job(client, r.json()["job_id"], timeout=300)  # a guard against the hang, not a timing
    assert job["status"] == "succeeded", (job, worker_logs(env))
    return job


def test_a_rollback_on_a_worker_that_did_not_run_the_reindex_finishes(
    tmp_path: Path,
    redis_server: RedisServer,
    tiny_embedder_dir: Path,
    workers: dict[str, subprocess.Popen[bytes]],
) -> None:
    env = worker_env(tmp_path, redis_server.url, tiny_embedder_dir)
    data = Path(env["VELA_DATA_DIR"])
    registry = ModelRegistry(data / "models")
    registry.register("tiny", tiny_embedder_dir)
    registry.register("tiny2", save_tiny_bert(tmp_path / "tiny2"))
    workers["w1"] = start_worker("w1", env)
    until("w1 is registered", lambda: _registered(redis_server.url, "w1", workers["w1"]), 180)
    with running_server(data, redis_url=redis_server.url, embedder=str(tiny_embedder_dir)) as client:
        _job(client, "/index", {"collection": "rc1", "documents": DOCS}, env)  # w1 opens rc1 at generation 0
        _job(client, "/index", {"collection": "other", "documents": DOCS[:1]}, env)
        # w1 is kept busy (a reindex of another collection waits for a lock held here), so that w2 runs rc1's.
        # Not the writer lock: a worker takes each collection's as it starts (its consistency check).
        with file_lock(data / "collections" / "other" / ".generation-job.lock"):
            r = client.post("/collections/other/reindex", json={"embedder": "tiny2"})
            held = r.json()["job_id"]
            until("w1 runs the held job", lambda: client.get(f"/jobs/{held}").json()["status"] == "running")
            assert client.get(f"/jobs/{held}").json()["worker"] == "w1"
            workers["w2"] = start_worker("w2", env)
            until("w2 is registered", lambda: _registered(redis_server.url, "w2", workers["w2"]), 180)
            reindex = _job(client, "/collections/rc1/reindex", {"embedder": "tiny2"}, env)
            assert reindex["worker"] == "w2" and reindex["result"]["promoted"]
        assert wait_job(client, held)["status"] == "succeeded"
        workers["w2"].send_signal(signal.SIGTERM)  # idle: it stops at once; w1 takes whatever comes next
        assert workers["w2"].wait(60) == 0

        back = _job(client, "/collections/rc1/rollback", {}, env)  # w1 still had generation 0 open
        assert back["worker"] == "w1" and back["result"] == {"generation": 0, "previous": 1}
        forward = _job(client, "/collections/rc1/rollback", {}, env)  # the second one switches forward again
        assert forward["result"] == {"generation": 1, "previous": 0}
        manual = _job(client, "/collections/rc1/reindex", {"embedder": "tiny", "promote": "manual"}, env)
        assert not manual["result"]["promoted"]
        promoted = _job(client, "/collections/rc1/promote", {}, env)
        assert promoted["result"] == {"generation": manual["result"]["generation"], "previous": 1}

        info = client.get("/collections/rc1").json()
        assert info["generations"]["current"]["generation"] == manual["result"]["generation"]
        assert info["documents"] == len(DOCS)
        hits = client.post("/search", json={"collection": "rc1", "query": "mk7z", "mode": "bm25", "k": 1}).json()
        assert [h["id"] for h in hits["hits"]] == ["d7"]
