"""Bounded requests: body size counted as it streams, keys checked before the body, slow or silent clients
dropped, the work and the time of one request bounded, and a fair query encoder. Raw sockets where a client
misbehaves on the wire; a socket timeout only guards against a hang (the server answering is what is tested)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import service.api.routes.search as search_routes
from service.batching import MicroBatcher, share_out
from service.server import uvicorn_config
from service.settings import Settings
from tests.service.conftest import running_server, wait_job

HANG_GUARD_S = 30


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with running_server(
        tmp_path_factory.mktemp("limits"),
        api_keys="k1",
        max_request_bytes=2048,
        body_timeout_s=0.3,
        header_timeout_s=0.3,
        max_header_bytes=16_384,
        max_batch_queries=50,
        max_search_hits=1000,
        max_search_depth=10_000,
        max_query_chars=1000,
        max_response_bytes=1500,
    ) as client:
        client.headers["X-API-Key"] = "k1"
        docs = [{"id": f"d{i}", "text": f"moon tides sea number {i}", "metadata": {"pad": "x" * 200}} for i in range(6)]
        r = client.post("/index", json={"collection": "c", "documents": docs})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        yield client


def _connect(client: httpx.Client) -> socket.socket:
    sock = socket.create_connection((client.base_url.host, client.base_url.port or 80), timeout=HANG_GUARD_S)
    sock.settimeout(HANG_GUARD_S)
    return sock


def _read_response(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of the one response on this connection (the server closes it after)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = [
            int(v) for k, _, v in (h.partition(b":") for h in head.split(b"\r\n")) if k.lower() == b"content-length"
        ]
        if length and len(body) >= length[0]:
            return int(head.split()[1]), json.loads(body[: length[0]])
    raise AssertionError(f"connection closed without a complete response: {data!r}")


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(tight: httpx.Client) -> None:
    with _connect(tight) as sock:
        sock.sendall(
            b"POST /index HTTP/1.1\r\nHost: x\r\nX-API-Key: k1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(3):  # 3000 bytes of a body that never ends: the server must not wait for the rest
            sock.sendall(b"3e8\r\n" + b" " * 1000 + b"\r\n")
        status, body = _read_response(sock)
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    assert body["error"]["message"].startswith("request body over 2048 bytes (VELA_MAX_REQUEST_BYTES): split a batch")


def test_a_chunked_body_over_the_limit_sent_in_full_is_413(tight: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"collection": "c", "documents": ['
        yield b'{"id": "x", "text": "' + b"y" * 4000 + b'"}]}'

    r = tight.post("/index", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"


def test_the_key_is_checked_before_any_body_is_read(tight: httpx.Client) -> None:
    for key_header in (b"", b"X-API-Key: wrong\r\n", "X-API-Key: clé\r\n".encode()):
        with _connect(tight) as sock:
            # A declared body (within the limit) that never comes: only the headers can be answered.
            sock.sendall(b"POST /index HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n" + key_header + b"\r\n")
            status, body = _read_response(sock)
        assert status == 401 and body["error"]["code"] == "unauthorized"


def test_a_body_that_stops_arriving_is_408(tight: httpx.Client) -> None:
    with _connect(tight) as sock:
        sock.sendall(b'POST /search HTTP/1.1\r\nHost: x\r\nX-API-Key: k1\r\nContent-Length: 100\r\n\r\n{"coll')
        status, body = _read_response(sock)
    assert status == 408 and body["error"]["code"] == "request_timeout"
    assert body["error"]["request_id"]


@pytest.mark.parametrize("partial", [b"", b"GET /healthz HTTP/1.1\r\n", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1"])
def test_a_connection_that_does_not_finish_its_headers_is_closed(tight: httpx.Client, partial: bytes) -> None:
    with _connect(tight) as sock:
        sock.sendall(partial)
        assert sock.recv(1024) == b""  # closed by the server (a hang would raise the guard's timeout)


@pytest.mark.parametrize(
    "request_head",
    [
        b"GET /collections/c/documents?cursor=" + b"A" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # a long URL
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 100_000 + b"\r\n\r\n",  # a long header
    ],
)
def test_a_request_line_and_headers_past_the_limit_are_refused(tight: httpx.Client, request_head: bytes) -> None:
    """They are read into memory before any route or key check: bounded by VELA_MAX_HEADER_BYTES (431)."""
    with _connect(tight) as sock:
        with contextlib.suppress(OSError):  # the server may close before every byte is sent
            sock.sendall(request_head)
        status, body = _read_response(sock)
    assert status == 431 and body["error"]["code"] == "headers_too_large"
    assert tight.get("/healthz").status_code == 200


def test_keep_alive_connections_still_serve_requests(tight: httpx.Client) -> None:
    for _ in range(3):  # the header clock restarts with every request on the connection
        assert tight.get("/healthz").status_code == 200


def test_uvicorn_gets_the_connection_limits(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, max_connections=7, keep_alive_s=3, header_timeout_s=2.5)
    config = uvicorn_config(object(), settings, host="127.0.0.1", port=1)
    assert config.limit_concurrency == 7 and config.timeout_keep_alive == 3
    assert config.http.header_timeout_s == 2.5  # type: ignore[union-attr]


def test_connections_past_the_cap_are_refused(tmp_path: Path) -> None:
    # uvicorn counts the connection being served: with a cap of 3, two connections are served, the third is not.
    with running_server(tmp_path, max_connections=3, keep_alive_s=60) as client:
        assert client.get("/healthz").status_code == 200  # one kept-alive connection
        with httpx.Client(base_url=client.base_url) as second, httpx.Client(base_url=client.base_url) as third:
            assert second.get("/healthz").status_code == 200  # the second
            assert third.get("/healthz").status_code == 503  # the third is over the cap


# --- work and time of one request --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"queries": ["moon"] * 3, "k": 400}, "(k + offset) x queries, is 1200; the limit is 1000"),
        ({"queries": ["moon"] * 2, "k": 10, "offset": 491}, "(k + offset) x queries, is 1002; the limit is 1000"),
        ({"queries": ["moon"] * 2, "mode": "hybrid", "depth": 6000}, "depth x queries is 12000; the limit is 10000"),
        ({"queries": ["m" * 600] * 2}, "the queries have 1200 characters; the limit is 1000"),
        ({"queries": ["moon"] * 51}, "51 queries in one request; the limit is 50"),
        ({"queries": ["moon"], "k": 6, "group_by_doc": False}, "the response would be"),
    ],
)
def test_the_work_of_one_request_is_bounded(tight: httpx.Client, body: dict[str, Any], needle: str) -> None:
    r = tight.post("/search/batch", json={"collection": "c", "mode": "bm25", **body})
    assert r.status_code == 413, r.text
    assert r.json()["error"]["code"] == "payload_too_large" and needle in r.json()["error"]["message"]
    if len(body["queries"]) == 1:
        single = {k: v for k, v in body.items() if k != "queries"} | {"query": body["queries"][0]}
        r = tight.post("/search", json={"collection": "c", "mode": "bm25", **single})
        assert r.status_code == 413 and needle in r.json()["error"]["message"]
    assert tight.post("/search/batch", json={"collection": "c", "queries": ["moon"], "k": 2}).status_code == 200


def test_the_depth_limit_counts_hybrid_searches_only(tmp_path: Path) -> None:
    # Dense and BM25 read no lists to a depth (and refuse a `depth`): with the limit below the default 200, every
    # one of them was refused, with advice to lower a depth they may not send.
    with running_server(tmp_path, max_search_depth=300) as client:
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "a", "text": "moon tides"}]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        for mode in ("dense", "bm25"):
            r = client.post("/search/batch", json={"collection": "c", "queries": ["moon"] * 3, "mode": mode})
            assert r.status_code == 200, r.text
        r = client.post("/search/batch", json={"collection": "c", "queries": ["moon"] * 3, "mode": "hybrid"})
        assert r.status_code == 413 and "depth x queries is 600" in r.json()["error"]["message"]


def test_a_request_past_its_deadline_is_503(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    async def stuck(*args: Any, **kwargs: Any) -> Any:
        from fastapi.concurrency import run_in_threadpool

        await run_in_threadpool(release.wait, HANG_GUARD_S)  # a search that takes too long, in the thread pool
        raise AssertionError("the deadline should have answered")

    with running_server(tmp_path, request_timeout_s=0.3) as client:
        monkeypatch.setattr(search_routes, "_run", stuck)
        try:
            r = client.post("/search", json={"collection": "c", "query": "moon"})
        finally:
            release.set()
        assert r.status_code == 503, r.text
        err = r.json()["error"]
        assert err["code"] == "timeout" and "0.3 s" in err["message"] and err["request_id"] == r.headers["x-request-id"]
        monkeypatch.undo()
        assert client.get("/healthz").status_code == 200


# --- a fair query encoder ----------------------------------------------------------------------------------------


class _Recorder:
    """Records every forward pass; the first pass waits until the test lets it go."""

    name = "recorder"

    def __init__(self) -> None:
        self.passes: list[list[str]] = []
        self.first_started = threading.Event()
        self.go = threading.Event()

    def encode_queries(self, texts: Sequence[str], *, context: Any = None) -> np.ndarray:
        self.first_started.set()
        assert self.go.wait(HANG_GUARD_S)
        self.passes.append(list(texts))
        return np.array([[float(t.split("-")[1])] for t in texts], dtype=np.float32)


def test_share_out_is_round_robin() -> None:
    assert share_out([100, 1, 3], 8) == [4, 1, 3]
    assert share_out([2, 2], 8) == [2, 2]
    assert share_out([5], 3) == [3]


def test_a_large_batch_does_not_starve_a_single_query() -> None:
    rec = _Recorder()
    batcher = MicroBatcher(rec, max_batch=8, max_wait_ms=0)  # type: ignore[arg-type]
    results: dict[str, np.ndarray] = {}
    try:
        big = threading.Thread(target=lambda: results.update(big=batcher.encode_queries([f"b-{i}" for i in range(64)])))
        big.start()
        assert rec.first_started.wait(HANG_GUARD_S)  # the big batch's first pass is running
        single = threading.Thread(target=lambda: results.update(single=batcher.encode_queries(["s-1000"])))
        single.start()
        while batcher._queue.qsize() == 0:  # the single query is queued behind the running pass
            threading.Event().wait(0.001)
        rec.go.set()
        big.join(HANG_GUARD_S)
        single.join(HANG_GUARD_S)
    finally:
        rec.go.set()
        batcher.stop()
    assert all(len(p) <= 8 for p in rec.passes)  # a large request is split into passes of max_batch
    single_pass = next(i for i, p in enumerate(rec.passes) if "s-1000" in p)
    last_big_pass = max(i for i, p in enumerate(rec.passes) if any(t.startswith("b-") for t in p))
    assert single_pass < last_big_pass, rec.passes  # served while the big batch was still being encoded
    np.testing.assert_array_equal(results["big"][:, 0], np.arange(64))  # each request gets its own rows, in order
    np.testing.assert_array_equal(results["single"], [[1000.0]])


def test_a_json_body_has_its_own_smaller_limit_and_a_snapshot_upload_the_large_one(tmp_path: Path) -> None:
    """A JSON body is parsed whole on the event loop, holding up the process's other requests meanwhile: it is
    bounded by VELA_MAX_JSON_BYTES (32 MiB by default), refused before it is read when declared and as soon as it
    passes the limit when streamed. A snapshot upload, streamed to disk, keeps VELA_MAX_REQUEST_BYTES."""
    assert Settings(data_dir=tmp_path).max_json_bytes == 32 * 1024 * 1024
    with running_server(tmp_path, max_json_bytes=4096, max_request_bytes=65_536) as client:
        json_413 = "request body over 4096 bytes (VELA_MAX_JSON_BYTES): split a batch into several requests"
        with _connect(client) as sock:  # declared: answered on the headers, the body never sent
            sock.sendall(
                b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
            )
            status, body = _read_response(sock)
        assert status == 413 and body["error"]["code"] == "payload_too_large"
        assert body["error"]["message"] == json_413
        with _connect(client) as sock:  # streamed: refused once past the limit, without waiting for the rest
            sock.sendall(
                b"POST /index HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            for _ in range(5):
                sock.sendall(b"3e8\r\n" + b" " * 1000 + b"\r\n")
            status, body = _read_response(sock)
        assert status == 413 and body["error"]["message"] == json_413
        within = {"collection": "none", "query": "x" * 3000}
        assert client.post("/search", json=within).json()["error"]["code"] == "collection_not_found"
        # A 10,000-byte upload is read (and found to be no snapshot); one past VELA_MAX_REQUEST_BYTES is not.
        r = client.post("/snapshots/upload", params={"into": "u"}, content=b"x" * 10_000)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_snapshot", r.text
        r = client.post("/snapshots/upload", params={"into": "u"}, content=b"x" * 70_000)
        assert r.status_code == 413 and r.json()["error"]["message"].startswith(
            "request body over 65536 bytes (VELA_MAX_REQUEST_BYTES): a larger snapshot upload"
        )
