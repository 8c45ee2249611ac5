"""Many processes opening the same fresh data directory at the same moment: none may fail.

Workers started together (`docker compose up --scale worker=N`, or a test's two workers) all create the
job store and switch it to WAL at once; that switch takes a lock SQLite does not wait for."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from tests.redis_fixtures import RedisServer, start_worker, worker_env, worker_logs
from tests.service.conftest import _free_port

OPEN_STORES = """
import os, sys, time
from pathlib import Path
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
from indexing.docstore import DocStore
from indexing.jobs import JobStore
from indexing.jobs import JobKind
data = Path(sys.argv[1])
jobs = JobStore(data / "jobs.sqlite3")  # as a worker and the API do at start-up, then write at once
for _ in range(5):
    jobs.create(collection="c", kind=JobKind.DELETE, payload=["x"])
DocStore(data / "docs.sqlite3").counts()
"""


@pytest.mark.slow  # the default suite starts stores together in test_workers_and_api_start_together
def test_eight_processes_open_fresh_stores_at_once(tmp_path: Path) -> None:
    """20 rounds of 8 processes released together on a fresh directory: every one exits 0."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for round_ in range(20):
        data, go = tmp_path / f"r{round_}", tmp_path / f"go{round_}"
        procs = [
            subprocess.Popen([sys.executable, "-c", OPEN_STORES, str(data), str(go)], env=env, stderr=subprocess.PIPE)
            for _ in range(8)
        ]
        time.sleep(0.5)  # every interpreter is up and polling
        go.touch()
        errors = [p.communicate(timeout=60)[1].decode() for p in procs if p.wait(60) != 0]
        assert not errors, f"round {round_}: {len(errors)} of 8 failed:\n{errors[0][-2000:]}"


def _start_all(tmp_path: Path, redis_url: str, embedder: Path, n_workers: int) -> list[subprocess.Popen[bytes]]:
    env = worker_env(tmp_path, redis_url, embedder)
    procs = [start_worker(f"w{i}", env) for i in range(n_workers)]
    api_log = (tmp_path / "api.log").open("ab")
    api_env = {**env, "VELA_PORT": str(_free_port())}
    serve = [sys.executable, "-m", "cli.main", "serve"]
    procs.append(subprocess.Popen(serve, env=api_env, stdout=api_log, stderr=api_log))
    return procs


def _workers_and_api_start_together(tmp_path: Path, embedder: Path, rounds: int, n_workers: int = 8) -> None:
    server = RedisServer(tmp_path)
    server.start()
    try:
        for round_ in range(rounds):
            workdir = tmp_path / f"round{round_}"
            workdir.mkdir()
            procs = _start_all(workdir, server.url, embedder, n_workers)
            env = worker_env(workdir, server.url, embedder)
            try:
                r = redis.Redis.from_url(server.url, decode_responses=True)
                deadline = time.time() + 240
                while True:  # every worker has joined the consumer group: it is past its start-up
                    try:
                        joined = len(r.xinfo_consumers("vela:jobs", "vela-workers"))
                    except redis.ResponseError:
                        joined = 0
                    exited = [p.args for p in procs if p.poll() is not None]
                    assert not exited, f"round {round_}: exited {exited}:\n{worker_logs(env)}"
                    if joined >= n_workers:
                        break
                    assert time.time() < deadline, f"round {round_}: {joined} of {n_workers} workers started"
                    time.sleep(0.2)
                r.delete("vela:jobs")  # the next round starts with a fresh stream
            finally:
                for p in procs:
                    p.kill()
                    p.wait(10)
    finally:
        server.stop()


def test_workers_and_api_start_together(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    # 3 workers and the API in the default suite (four interpreters loading torch at once on 2 cores already race
    # on every shared file); the slow test below runs 8 workers for 20 rounds.
    _workers_and_api_start_together(tmp_path, tiny_embedder_dir, rounds=1, n_workers=3)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 20 rounds of 9 interpreters loading torch on 2 cores: about 11 minutes
def test_workers_and_api_start_together_20_rounds(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    _workers_and_api_start_together(tmp_path, tiny_embedder_dir, rounds=20)
