"""The request deadline stops computations, not transfers: past it, a request still moving body bytes at the
minimum rate goes on (a snapshot download or upload), and one that stalls or computes is stopped."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from service.middleware import request_guard
from service.server import ABORT_CONNECTION

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
