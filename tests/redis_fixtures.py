"""A real redis-server for the tests of the Redis job mode, `vela worker` processes, and waiting for a condition.
The `redis_server` fixture (tests/conftest.py) starts one per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from tests.service.conftest import _free_port


class RedisServer:
    """A real redis-server with AOF persistence in a temp dir; restartable on the same port and data."""

    def __init__(self, workdir: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is not installed: `make test` installs it (apt-get install redis-server)")
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--appendonly", "yes"]
        self.proc = subprocess.Popen([*argv, "--dir", str(self.workdir)], stdout=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                if redis.Redis.from_url(self.url).ping():
                    return
            except redis.ConnectionError:
                assert time.time() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


def start_worker(name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A `vela worker` process; its log goes to <data dir>/../<name>.log so a failure can show it."""
    log = Path(env["VELA_DATA_DIR"]).parent / f"{name}.log"
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker", "--name", name], env=env, stdout=out, stderr=out
        )


def worker_logs(env: dict[str, str]) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in Path(env["VELA_DATA_DIR"]).parent.glob("*.log"))


def worker_env(tmp_path: Path, redis_url: str, embedder: Path) -> dict[str, str]:
    return {
        **os.environ,
        "VELA_REDIS_URL": redis_url,
        "VELA_DATA_DIR": str(tmp_path / "data"),
        "VELA_EMBEDDER": str(embedder),
        "VELA_CLAIM_IDLE_S": "2",
        "VELA_INGEST_BATCH_SIZE": "20",
        "VELA_WORKER_NICE": "0",
    }


def until(what: str, ok: Callable[[], bool], timeout: float = 60, step: float = 0.05) -> None:
    """Wait for `ok()`; fail naming `what` after `timeout` seconds (a guard against a hang, not a timing)."""
    deadline = time.time() + timeout
    while not ok():
        assert time.time() < deadline, f"never: {what}"
        time.sleep(step)
