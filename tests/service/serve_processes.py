"""`vela serve --processes 2` as a real subprocess, and what the tests of it read from /proc: its processes, the
sockets they hold, who holds a file lock. Shared by test_processes.py and test_processes_stop.py."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.service.conftest import _free_port

REPO = Path(__file__).resolve().parents[2]


def child_pids(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that ended after the listing (its children are its process's)
            continue
    return sorted(out)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for whoever adopted it to reap it counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ready(base: str) -> bool:
    try:
        return call(base, "GET", "/readyz").status_code == 200
    except httpx.TransportError:
        return False


def call(base: str, method: str, path: str, **kw: Any) -> httpx.Response:
    """One request on a connection of its own (the kernel may give it to either process)."""
    with httpx.Client(base_url=base, timeout=60) as client:
        return client.request(method, path, **kw)


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout  # a guard against a hang, not a timed assertion
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def wait_job(base: str, job_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def done() -> bool:
        out.update(call(base, "GET", f"/jobs/{job_id}").json())
        return out["status"] in ("succeeded", "failed")

    wait_until(done, 120, f"job {job_id} never ended")
    return out


@contextlib.contextmanager
def serve_processes(tmp_path: Path, embedder_dir: Path) -> Iterator[dict[str, Any]]:
    """`vela serve --processes 2` on a free port, once both processes answer: its Popen, base URL, metrics folder,
    data directory and log file. Killed at the end if a test left it running."""
    port = _free_port()
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "VELA_DATA_DIR": str(tmp_path / "data"),
        "VELA_EMBEDDER": str(embedder_dir),
        "PROMETHEUS_MULTIPROC_DIR": str(metrics),
    }
    log = (tmp_path / "serve.log").open("ab")
    cmd = [sys.executable, "-m", "cli.main", "serve", "--processes", "2", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"

    def both_ready() -> bool:
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
        if len(child_pids(proc.pid)) != 2:
            return False
        return all(ready(base) for _ in range(10))  # both processes answer: ten fresh connections in a row

    try:
        wait_until(both_ready, 300, "the server never became ready")
        yield {"proc": proc, "base": base, "metrics": metrics, "data": tmp_path / "data", "log": tmp_path / "serve.log"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        log.close()


def listening_inode(port: int) -> str:
    """The inode of the socket listening on `port` (one socket, whose copies the supervisor and its processes hold)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] == "0A":  # 0A: LISTEN
            return f[9]
    raise AssertionError(f"nothing listens on {port}")


def accepted_inode(port: int, client_port: int) -> str:
    """The inode of the server's end of the connection from `client_port` to `port` (once a process accepted it)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        local, remote = int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16)
        if (local, remote, f[3]) == (port, client_port, "01"):  # 01: ESTABLISHED
            return f[9]
    raise AssertionError(f"no connection from {client_port} to {port}")


def holds(pid: int, inode: str) -> bool:
    """Whether process `pid` still has a copy of socket `inode` open."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return False
    for fd in fds:
        with contextlib.suppress(OSError):  # an fd closed meanwhile
            if os.readlink(fd) == f"socket:[{inode}]":
                return True
    return False


def flock_holders(path: Path) -> list[int]:
    """The processes holding an flock on `path` (/proc/locks: `1: FLOCK ADVISORY WRITE <pid> <maj:min:inode> ...`)."""
    inode = os.stat(path).st_ino
    out = []
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if f[1] == "FLOCK" and int(f[5].rsplit(":", 1)[1]) == inode:
            out.append(int(f[4]))
    return out
