"""`vela serve --processes 2`: two API processes on one port behave as one server.

Every request below opens its own connection, so the kernel hands them to either process. Jobs are recorded by
whichever process took the request and run by the one that holds the job runner's lock; a collection deleted or
created again through one process is gone or new in the other at once; /metrics sums both; a killed process is
started again and a killed runner's jobs move to the other; SIGTERM (or SIGINT) stops everything, and once the
processes stop accepting, the port refuses new connections while the requests they took are still answered."""

from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.serve_processes import (
    alive,
    call,
    child_pids,
    holds,
    listening_inode,
    ready,
    serve_processes,
    wait_job,
    wait_until,
)

DOCS = [{"id": f"d{i}", "text": f"moon tides gravity note {i}"} for i in range(12)]


@pytest.fixture
def server(tmp_path: Path, tiny_embedder_dir: Path) -> Iterator[dict[str, Any]]:
    with serve_processes(tmp_path, tiny_embedder_dir) as out:
        yield out


def _index(base: str, collection: str, docs: list[dict[str, Any]]) -> None:
    r = call(base, "POST", "/index", json={"collection": collection, "documents": docs})
    assert r.status_code == 202, r.text
    assert wait_job(base, r.json()["job_id"])["status"] == "succeeded"


def _search_ids(base: str, collection: str) -> list[list[str]] | int:
    """Twenty searches on fresh connections: each one's ids, or the status when one is not 200."""
    out = []
    for _ in range(20):
        r = call(base, "POST", "/search", json={"collection": collection, "query": "moon gravity", "k": 3})
        if r.status_code != 200:
            return r.status_code
        out.append(sorted(h["id"] for h in r.json()["hits"]))
    return out


def test_two_processes_serve_one_port_as_one_server_and_a_killed_one_is_replaced(server: dict[str, Any]) -> None:
    base, proc = server["base"], server["proc"]
    _index(base, "c", DOCS)
    results = _search_ids(base, "c")
    assert isinstance(results, list) and all(len(ids) == 3 for ids in results)
    # Both processes answered searches: each keeps its counts in a file of its own, and a scrape sums them.
    counters = sorted(p.name for p in server["metrics"].glob("counter_*.db"))
    assert counters == sorted(f"counter_{pid}.db" for pid in child_pids(proc.pid)), counters
    text = call(base, "GET", "/metrics").text
    line = next(x for x in text.splitlines() if x.startswith('vela_http_requests_total{method="POST",route="/search"'))
    assert float(line.rsplit(" ", 1)[1]) == 20.0

    # Deleted through one process: gone in both. Created again with other documents: new in both.
    assert call(base, "DELETE", "/collections/c").status_code in (200, 204)
    assert _search_ids(base, "c") == 404
    _index(base, "c", [{"id": "new", "text": "moon gravity"}])
    assert _search_ids(base, "c") == [["new"]] * 20

    # A killed process is replaced, and the jobs move to the survivor (one server started for both checks).
    _index(base, "c", DOCS[:3])
    for victim in child_pids(proc.pid):  # each in turn, so the job runner is among them
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda v=victim: v not in (now := child_pids(proc.pid)) and len(now) == 2, 120, "not replaced")
        wait_until(lambda: all(ready(base) for _ in range(10)), 120, "not ready")
        _index(base, "c", [{"id": f"after-{victim}", "text": "moon gravity"}])
    r = call(base, "GET", "/collections/c")
    assert r.json()["documents"] == 6


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopping_server_refuses_new_connections_and_answers_accepted_ones(
    server: dict[str, Any], sig: signal.Signals
) -> None:
    """Once every process has stopped accepting, a new connection is refused at once (as with one process) rather
    than queued on a socket nobody accepts on; a request a process took before the signal is still answered; then
    every process stops and the supervisor exits 0."""
    base, proc = server["base"], server["proc"]
    port = int(base.rsplit(":", 1)[1])
    _index(base, "c", DOCS[:4])
    children, inode = child_pids(proc.pid), listening_inode(port)
    assert all(holds(pid, inode) for pid in [proc.pid, *children])

    # A request in progress: its headers are in, and the app waits for its body (uvicorn's "100 Continue" says
    # the app has asked for it). The process that took it drains it before it exits.
    body = json.dumps({"collection": "c", "query": "moon gravity", "k": 3}).encode()
    held = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        held.sendall(
            b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        assert held.recv(100).startswith(b"HTTP/1.1 100 ")

        proc.send_signal(sig)
        wait_until(lambda: not any(holds(pid, inode) for pid in children), 30, "the processes never stopped accepting")
        assert proc.poll() is None  # still stopping: the held request keeps its process (and so the supervisor)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=10).close()
        with pytest.raises(httpx.ConnectError):  # not a timeout: nothing is left waiting to be accepted
            httpx.get(f"{base}/healthz", timeout=10)

        held.sendall(body)
        answer = b""
        while chunk := held.recv(65536):  # to the end: a stopping process closes the connection after the answer
            answer += chunk
    finally:
        held.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert b'"hits"' in answer
    assert proc.wait(60) == 0
    for pid in children:
        wait_until(lambda p=pid: not alive(p), 30, f"process {pid} outlived the server")


def test_a_killed_supervisor_takes_its_processes_with_it(server: dict[str, Any]) -> None:
    proc = server["proc"]
    children = child_pids(proc.pid)
    proc.kill()
    proc.wait(30)
    for pid in children:
        wait_until(lambda p=pid: not alive(p), 60, f"process {pid} outlived a killed server")
