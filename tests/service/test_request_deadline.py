"""The request deadline stops computations, not transfers: past it, a request still moving body bytes at the
minimum rate goes on (a snapshot download or upload), and one that stalls or computes is stopped."""

from __future__ import annotations

import asyncio
import json
import select
import socket
from pathlib import Path
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

import service.server as server_mod
from service.middleware import request_guard
from service.server import ABORT_CONNECTION
from tests.service.conftest import running_server, wait_job

CHUNK = 64 * 1024
SCOPE: Scope = {"type": "http", "method": "GET", "path": "/x", "headers": []}


def _serve(app: Any, body_chunks: int = 0, delay: float = 0.0) -> list[Message]:
    """Runs `app` behind the guard (deadline 0.5 s, windows of 0.2 s, 64 KiB each); what the client got."""
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal body_chunks
        await asyncio.sleep(delay)
        body_chunks -= 1
        return {"type": "http.request", "body": b"x" * CHUNK, "more_body": body_chunks > 0}

    async def send(message: Message) -> None:
        sent.append(message)

    guarded = request_guard(app, timeout_s=0.5, window_s=0.2, min_bytes=CHUNK)
    asyncio.run(guarded(dict(SCOPE), receive, send))
    return sent


def _body(sent: list[Message]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_a_slow_download_past_the_deadline_completes() -> None:
    async def download(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(15):  # 1.5 s of steady 640 KiB/s
            await asyncio.sleep(0.1)
            await send({"type": "http.response.body", "body": b"y" * CHUNK, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sent = _serve(download)
    assert len(_body(sent)) == 15 * CHUNK and sent[-1].get("more_body") is False


def test_a_stalled_download_is_cut_off() -> None:
    cancelled = []

    async def stalls(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"y" * CHUNK, "more_body": True})
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    sent = _serve(stalls)
    assert len(_body(sent)) == CHUNK and cancelled == [True]  # the response never finished: the server closes it


def test_a_slow_upload_past_the_deadline_is_answered() -> None:
    async def upload(scope: Scope, receive: Receive, send: Send) -> None:
        size, more = 0, True
        while more:
            message = await receive()
            size, more = size + len(message["body"]), message["more_body"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(size).encode()})

    sent = _serve(upload, body_chunks=15, delay=0.1)
    assert sent[0]["status"] == 200 and _body(sent) == str(15 * CHUNK).encode()


def test_a_computation_after_a_large_body_still_gets_its_deadline() -> None:
    async def computes(scope: Scope, receive: Receive, send: Send) -> None:
        more = True
        while more:
            more = (await receive())["more_body"]
        await asyncio.sleep(30)  # stands for work that moves no bytes

    sent = _serve(computes, body_chunks=16)  # 1 MiB read at once, well within the deadline
    assert sent[0]["status"] == 503 and json.loads(_body(sent))["error"]["code"] == "timeout"


def test_a_stalled_download_drops_its_connection() -> None:
    """Returning with the response unfinished makes uvicorn close the transport, which first sends what is
    buffered: to a client that stopped reading, never. The guard aborts the connection through the scope."""
    aborted = []

    async def stalls(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"y" * CHUNK, "more_body": True})
        await asyncio.sleep(30)

    scope = {**SCOPE, "extensions": {ABORT_CONNECTION: lambda: aborted.append(True)}}

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        pass

    asyncio.run(request_guard(stalls, timeout_s=0.5, window_s=0.2, min_bytes=CHUNK)(scope, receive, send))
    assert aborted == [True]


def test_a_large_body_goes_out_in_pieces_and_a_small_one_as_it_was() -> None:
    """The guard hands a large body to the server piece by piece (the server waits for the client between pieces,
    so the transfer stays under the deadline's watch); a small one, and the response head, go as they were."""
    big = bytes(range(256)) * 4000  # 1,024,000 bytes

    def answers(body: bytes) -> Any:
        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"x/y")]})
            await send({"type": "http.response.body", "body": body})

        return app

    sent = _serve(answers(big))
    pieces = [m for m in sent if m["type"] == "http.response.body"]
    assert len(pieces) == -(-len(big) // CHUNK) and all(len(m["body"]) <= CHUNK for m in pieces)
    assert [m["more_body"] for m in pieces] == [True] * (len(pieces) - 1) + [False] and _body(sent) == big
    head = dict(sent[0]["headers"])
    assert head[b"content-type"] == b"x/y" and b"server-timing" in head and b"x-request-id" in head
    small = _serve(answers(b"small"))
    assert [m["type"] for m in small] == ["http.response.start", "http.response.body"]
    assert small[1] == {"type": "http.response.body", "body": b"small"}


# h11 (the fallback parser) in `make test-slow`: the default suite keeps under 15 minutes
@pytest.mark.parametrize("parser", ["httptools", pytest.param("h11", marks=pytest.mark.slow)])
def test_a_search_answer_the_client_does_not_read_is_reset_past_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str
) -> None:
    """A search with a ~19 MB answer, sent by a client that then never reads: past the deadline and its last window
    the server resets the connection, dropping what it buffered. (The whole body used to go to the server in one
    message: the handler ended at once, the deadline had nothing to watch, and the connection and its buffer stayed
    for as long as the client kept the socket.)"""
    if parser == "h11":
        monkeypatch.setattr(server_mod, "_httptools_protocol", lambda: None)
    with running_server(tmp_path, request_timeout_s=4.0) as client:
        docs = [{"id": f"d{i}", "text": f"moon tides {i}", "metadata": {"blob": "y" * 60_000}} for i in range(20)]
        r = client.post("/index", json={"collection": "fat", "documents": docs})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        body = json.dumps({"collection": "fat", "queries": ["moon"] * 16, "k": 20, "mode": "bm25"}).encode()
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # before connecting: no autotuning
            sock.settimeout(60)
            sock.connect((client.base_url.host, client.base_url.port or 80))
            sock.sendall(
                b"POST /search/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            head = sock.recv(4096)
            assert head.startswith(b"HTTP/1.1 200"), head[:300]
            length = int(head.lower().partition(b"content-length: ")[2].partition(b"\r\n")[0])
            assert length > 15_000_000
            # Not reading: the server must give up on its own (the bound only guards against a hang).
            poller = select.poll()
            poller.register(sock, select.POLLERR | select.POLLHUP | select.POLLRDHUP)
            events = poller.poll(60_000)
            assert events and events[0][1] & (select.POLLERR | select.POLLHUP | select.POLLRDHUP), events
            got = len(head)
            with pytest.raises(ConnectionResetError):
                while chunk := sock.recv(1 << 20):
                    got += len(chunk)
            assert got < length  # the rest was dropped, not sent
        assert client.get("/healthz").status_code == 200


def test_the_engine_work_of_a_request_sees_its_deadline_and_stops_at_it() -> None:
    # The request guard hands its deadline to the thread that runs the handler's engine work: a filter there
    # stops once the deadline has passed (here it passes as the request starts: a deadline of 0 s) instead of
    # running on for a client that has had its 503.
    from indexing import deadline
    from indexing.filter_parser import parse_filter
    from indexing.payload import Payload

    stopped: list[bool] = []
    node = parse_filter({"must_not": [{"key": "v", "range": {"lt": -1 - i}} for i in range(256)]})
    assert node is not None

    def engine_work() -> None:
        try:
            Payload([{"v": list(range(100))}] * 10).mask(node, {})
            stopped.append(False)
        except deadline.DeadlineExceeded:
            stopped.append(True)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.to_thread(engine_work)

    guarded = request_guard(app, timeout_s=0.0)
    asyncio.run(guarded(dict(SCOPE), _never, _drop))
    assert stopped == [True]
    engine_work()  # outside a request: no deadline, the whole filter runs
    assert stopped == [True, False]


async def _never() -> Message:
    await asyncio.sleep(3600)
    return {"type": "http.disconnect"}


async def _drop(message: Message) -> None:
    pass
