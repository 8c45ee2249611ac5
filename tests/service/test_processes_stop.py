"""Stopping `vela serve --processes 2`: from its SIGTERM on, no process starts a queued job, not even one that goes on
draining an open connection after the job runner has finished its job and exited; and the supervisor says which
process it had to kill when one does not stop in time."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexing.jobs import JobStore
from tests.service.conftest import _free_port
from tests.service.serve_processes import (
    REPO,
    accepted_inode,
    alive,
    call,
    child_pids,
    flock_holders,
    holds,
    listening_inode,
    serve_processes,
    wait_job,
    wait_until,
)


@pytest.fixture
def server(tmp_path: Path, tiny_embedder_dir: Path) -> Iterator[dict[str, Any]]:
    with serve_processes(tmp_path, tiny_embedder_dir) as out:
        yield out


def _submit(base: str, collection: str, doc_id: str) -> str:
    r = call(base, "POST", "/index", json={"collection": collection, "documents": [{"id": doc_id, "text": "moon"}]})
    assert r.status_code == 202, r.text
    return str(r.json()["job_id"])


def _status(base: str, job_id: str) -> str:
    return str(call(base, "GET", f"/jobs/{job_id}").json()["status"])


BODY = json.dumps({"collection": "c", "query": "moon", "k": 1}).encode()


def _request_held_by(pid: int, port: int) -> socket.socket:
    """A request in progress in process `pid`: its headers are in, and the app waits for its body (uvicorn's
    "100 Continue" says it asked). The kernel picks the process: connections taken by the other one are closed."""
    for _ in range(50):
        conn = socket.create_connection(("127.0.0.1", port), timeout=60)
        conn.sendall(
            b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(BODY)
        )
        assert conn.recv(100).startswith(b"HTTP/1.1 100 ")
        if holds(pid, accepted_inode(port, conn.getsockname()[1])):
            return conn
        conn.close()
    raise AssertionError(f"no connection reached process {pid}")


def test_a_queued_job_stays_queued_while_a_stopping_process_drains_a_request(server: dict[str, Any]) -> None:
    """The runner finishes its running job and exits; the other process, still answering a slow request, used to
    take the job lock then and start the queued job, to be killed in the middle of it."""
    base, proc, data = server["base"], server["proc"], server["data"]
    port = int(base.rsplit(":", 1)[1])
    assert wait_job(base, _submit(base, "c", "first"))["status"] == "succeeded"  # "c" and its writer lock exist
    [runner] = flock_holders(data / "jobs.lock")
    [other] = [pid for pid in child_pids(proc.pid) if pid != runner]
    [writer_lock] = data.rglob("write.lock")
    inode = listening_inode(port)

    with open(writer_lock, "a+") as writer:
        fcntl.flock(writer, fcntl.LOCK_EX)  # the runner's next write to "c" waits for it, running
        running = _submit(base, "c", "running")
        wait_until(lambda: _status(base, running) == "running", 60, "the first job never started")
        queued = _submit(base, "c", "queued")  # behind it in the runner's lane
        held = _request_held_by(other, port)
        proc.send_signal(signal.SIGTERM)
        wait_until(lambda: not any(holds(p, inode) for p in (runner, other)), 30, "still accepting")
        fcntl.flock(writer, fcntl.LOCK_UN)  # the running job ends now, after the signal

    try:
        wait_until(lambda: not alive(runner), 60, "the runner never exited after its job")
        assert alive(other)  # still answering the held request
        time.sleep(1.0)  # ten of its job polls: none may take the lock the runner gave back
        assert flock_holders(data / "jobs.lock") == []
        held.sendall(BODY)
        answer = b""
        while chunk := held.recv(65536):
            answer += chunk
    finally:
        held.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert proc.wait(60) == 0

    jobs = JobStore(data / "jobs.sqlite3")
    assert jobs.get(running).status == "succeeded"
    left = jobs.get(queued)
    assert (left.status, left.attempts) == ("queued", 0)  # it runs after the restart
    assert "did not stop in time" not in server["log"].read_text()


STUBBORN = """
import os, signal, sys, time
from pathlib import Path
from indexing.logs import configure_logging
from service import processes

processes.STOP_WAIT_S = 0.5  # the supervisor's patience, short here
configure_logging("INFO")
marks = Path(sys.argv[1])

def stubborn(sock):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # an API process that does not stop
    (marks / str(os.getpid())).touch()
    while True:
        time.sleep(60)

sys.exit(processes.serve(2, "127.0.0.1", int(sys.argv[2]), stubborn, marks / "metrics"))
"""


def test_the_supervisor_logs_each_process_it_kills(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    cmd = [sys.executable, "-c", STUBBORN, str(marks), str(_free_port())]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len([p for p in marks.iterdir() if p.name.isdigit()]) == 2, 60, "the processes never ran")
        pids = sorted(int(p.name) for p in marks.iterdir() if p.name.isdigit())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, err
    lines = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    killed = [x for x in lines if x.get("msg") == "API process did not stop in time; killing it"]
    assert sorted(x["pid"] for x in killed) == pids, err
    assert sorted(x["slot"] for x in killed) == [0, 1]
    assert all(x["level"] == "warning" for x in killed), killed
    assert not any(alive(pid) for pid in pids)
