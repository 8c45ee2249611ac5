"""Pure ASGI guards that run before FastAPI sees a request (no BaseHTTPMiddleware task or stream per request).

Outermost first: `request_guard` (request id, Server-Timing, deadline, catch-all, large bodies sent in pieces),
`require_key` (in service/api_keys.py: API keys, checked before a single body byte is read), `limit_body`
(content coding, declared and streamed size, slow bodies).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote_to_bytes

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from indexing import deadline
from service import timing
from service.errors import (
    REQUEST_ID,
    ApiError,
    error_response,
    internal_error,
    shown,
    storage_fault,
    timeout_message,
)
from service.server import ABORT_CONNECTION, ARRIVED, MAX_PARSED_URL, URI_TOO_LONG

log = logging.getLogger("vela.service")
access_log = logging.getLogger("vela.access")

# A caller's own X-Request-ID is kept when it is short and plain (it ends up in logs and headers).
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Past its deadline a request that is still moving bytes (a snapshot upload or download, a large response to a
# slow reader) goes on, as long as every window moves at least this much in either direction: a transfer is bounded
# by its rate, a computation by the deadline (it moves no bytes while it runs).
TRANSFER_WINDOW_S = 5.0
TRANSFER_MIN_BYTES = 256 * 1024  # per window: about 51 KiB/s
# A response body over this goes to the server in pieces of this size. The server waits for the client to take the
# previous piece before it takes the next, so the handler's task lasts as long as the transfer does: the deadline
# above watches it, and what is buffered for one client is a piece or two, not the whole body. (Given the whole body
# at once, the server buffered all of it and the task ended: a client that did not read held it for ever.)
RESPONSE_PIECE_BYTES = 64 * 1024


def request_guard(
    app: ASGIApp,
    *,
    timeout_s: float,
    window_s: float = TRANSFER_WINDOW_S,
    min_bytes: int = TRANSFER_MIN_BYTES,
    access_log: bool = False,
    piece_bytes: int = RESPONSE_PIECE_BYTES,
    data_dir: Path | None = None,
) -> ASGIApp:
    """Gives every request an id (the X-Request-ID response header, `request_id` of error bodies and error logs),
    a Server-Timing header (service/timing.py: the stages the request went through, in ms), a deadline (503
    `timeout` when it passes, or the connection closed when the response had begun) and turns any unhandled
    exception into a 500 in the error shape. A request still transferring at its deadline goes on while each
    `window_s` moves `min_bytes` of body in or out. With `access_log`, each request ends with one log line
    (`vela.access`: method, path, status, ms, request id; status 0 when no response was sent). A response body
    over `piece_bytes` is sent in pieces of that size (RESPONSE_PIECE_BYTES), so that its transfer is watched too."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        given = Headers(scope=scope).get("x-request-id", "")
        rid = given if _CLIENT_REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(rid)
        # Set before the handler's task is made, so that the task (and the threads it hands work to) share it.
        timings, timing_token = timing.begin(scope.get("extensions", {}).get(ARRIVED))
        scope[timing.SCOPE_KEY] = timings  # for the metrics middleware outside this one (stage histograms)
        started = answered = False
        moved = 0  # body bytes received and sent
        status = 0  # the response's, once it has started
        began = time.perf_counter()

        gone = threading.Event()  # the client closed the connection: the request's work stops (indexing/deadline.py)
        watcher: asyncio.Task[None] | None = None

        async def watch() -> None:
            # After the body only a disconnect can come (both HTTP parsers answer every later receive with one once
            # the connection is lost, or once the response is complete, when nothing is left to stop).
            if (await receive())["type"] == "http.disconnect":
                gone.set()

        async def receive_counted() -> Message:
            nonlocal moved, watcher
            message = await receive()
            moved += len(message.get("body", b""))
            if message["type"] == "http.disconnect":
                gone.set()
            elif watcher is None and not message.get("more_body", False):  # the whole body is in: listen on
                watcher = asyncio.ensure_future(watch())
            return message

        def tagged(message: Message) -> Message:
            nonlocal status
            if message["type"] != "http.response.start":
                return message
            status = message["status"]
            own = (b"x-request-id", timing.HEADER)
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in own]
            extra = [(b"x-request-id", rid.encode()), (timing.HEADER, timing.finish(timings))]
            return {**message, "headers": [*headers, *extra]}

        async def send_direct(message: Message) -> None:
            await send(tagged(message))

        async def send_from_app(message: Message) -> None:
            nonlocal started, moved
            if answered:  # the deadline answered already; the late handler's response goes nowhere
                return
            started = started or message["type"] == "http.response.start"
            for piece in _pieces(tagged(message), piece_bytes):
                await send(piece)  # waits while the client has not taken what was sent before
                moved += len(piece.get("body", b""))

        handler = app
        too_long = URI_TOO_LONG in scope.get("extensions", {}) or len(scope.get("raw_path") or b"") > MAX_PARSED_URL
        if too_long:  # no route has a path that long (service/server.py; h11 reads one, httptools does not)
            message = f"the request path passes {MAX_PARSED_URL} bytes: send large values in a body or the query"
            handler = error_response(414, "uri_too_long", message)
        elif not _utf8_path(scope.get("raw_path")):  # the server decoded it with U+FFFD for the stray bytes
            message = (
                "the request path is not UTF-8 text once percent-decoded (a stray byte such as %FF): it would name "
                "another collection or document than the one meant"
            )
            handler = error_response(400, "invalid_path", message)
        # The handler runs as its own task so that the deadline can answer while it still runs: a search in the
        # thread pool cannot be interrupted, and cancelling it waits for the thread anyway.
        # The engine's scans check the same deadline (indexing/deadline.py) and stop at it, so that no work goes on
        # for a client that has had its 503; the task (and the threads it hands work to) copies it as it is made.
        with deadline.until(time.monotonic() + timeout_s, gone):
            task = asyncio.ensure_future(handler(scope, receive_counted, send_from_app))
        try:
            done, _ = await asyncio.wait({task}, timeout=max(timeout_s - window_s, 0.0))
            if not done:  # the deadline's last window: what moved in it decides whether a transfer goes on
                moved = 0
                done, _ = await asyncio.wait({task}, timeout=min(window_s, timeout_s))
            while not done and moved >= min_bytes:  # a transfer under way: one more window if it keeps the rate
                moved = 0
                done, _ = await asyncio.wait({task}, timeout=window_s)
            if done:
                task.result()
                return
            log.warning("request deadline passed", extra={"request_id": rid, "path": scope.get("path")})
            if not started:
                answered = True
                await error_response(503, "timeout", timeout_message(timeout_s))(scope, receive, send_direct)
            else:  # a response under way that stalled: drop the connection and what is buffered for it, now
                abort = scope.get("extensions", {}).get(ABORT_CONNECTION)
                if abort is not None:
                    abort()
        except Exception as exc:
            if (
                storage_fault(exc, data_dir) is not None
            ):  # the disk, not a bug: one line, no traceback (the answer says so)
                log.warning(
                    "storage fault", extra={"request_id": rid, "path": scope.get("path"), "error": str(exc)[:500]}
                )
            else:
                log.exception("unhandled error", extra={"request_id": rid, "path": scope.get("path")})
            if started:
                raise  # half a response went out: the server closes the connection
            await internal_error(exc, data_dir)(scope, receive, send_direct)
        finally:
            if not task.done():  # past the deadline, or we were cancelled ourselves (client gone, shutdown)
                task.cancel()
                task.add_done_callback(_swallow)
            if watcher is not None:
                watcher.cancel()
            if access_log:
                _log_access(scope, status, began, rid)
            timing.end(timing_token)
            REQUEST_ID.reset(token)

    return middleware


def _pieces(message: Message, size: int) -> Iterator[Message]:
    """A response body message as messages of at most `size` body bytes (other messages as they are)."""
    body = message.get("body", b"")
    if message["type"] != "http.response.body" or len(body) <= size:
        yield message
        return
    more = message.get("more_body", False)
    for start in range(0, len(body), size):
        end = start + size
        yield {**message, "body": body[start:end], "more_body": more or end < len(body)}


def _log_access(scope: Scope, status: int, began: float, rid: str) -> None:
    ms = round((time.perf_counter() - began) * 1000, 2)
    fields = {"method": scope.get("method"), "path": scope.get("path"), "status": status, "ms": ms, "request_id": rid}
    access_log.info("request", extra=fields)


def _swallow(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("request ended after its deadline with an error", exc_info=task.exception())


def _encoded_body(headers: Headers) -> str | None:
    """The content codings other than identity a request declares for its body (lowercased, joined), or None."""
    codings = [c.strip().lower() for value in headers.getlist("content-encoding") for c in value.split(",")]
    foreign = [c for c in codings if c and c != "identity"]
    return ", ".join(foreign) if foreign else None


def limit_body(
    app: ASGIApp,
    *,
    max_bytes: int,
    timeout_s: float,
    max_json_bytes: int | None = None,
    raw_paths: frozenset[str] = frozenset(),
) -> ASGIApp:
    """Refuses a body in a content coding (415: the server decodes none), refuses a declared body over the limit
    before reading it, counts the bytes of a streamed (chunked) body as they arrive and stops at the limit (413),
    and gives up on a client that stops sending mid-body (408).

    The limit is `max_bytes` on `raw_paths` (bodies streamed to disk: a snapshot upload) and `max_json_bytes` (at
    most `max_bytes`) everywhere else: a JSON body is parsed whole, on the event loop, before any other check, so
    its size bounds how long one request can hold up every other request of the process."""
    json_limit = max_bytes if max_json_bytes is None else min(max_json_bytes, max_bytes)
    json_setting = "VELA_MAX_REQUEST_BYTES" if json_limit == max_bytes else "VELA_MAX_JSON_BYTES"
    too_large_json = f"request body over {json_limit} bytes ({json_setting}): split a batch into several requests"
    too_large_raw = (
        f"request body over {max_bytes} bytes (VELA_MAX_REQUEST_BYTES): a larger snapshot upload needs the limit raised"
    )

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        coding = _encoded_body(headers)
        if coding is not None:
            message = (
                f"request body in Content-Encoding {shown(coding)}: the server decodes none; send the body "
                "uncompressed, without Content-Encoding"
            )
            refuse = error_response(415, "unsupported_encoding", message, headers={"Accept-Encoding": "identity"})
            await refuse(scope, receive, send)
            return
        raw = scope["path"] in raw_paths
        limit, too_large = (max_bytes, too_large_raw) if raw else (json_limit, too_large_json)
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await error_response(413, "payload_too_large", too_large)(scope, receive, send)
            return
        received = 0
        complete = False

        async def counted() -> Message:
            nonlocal received, complete
            if complete:  # after the body only a disconnect can come: no deadline on waiting for it
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), timeout_s)
            except TimeoutError:
                raise ApiError(
                    408, "request_timeout", f"request body not received: nothing arrived for {timeout_s:g} s"
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # FastAPI re-raises HTTPExceptions from the body read, so this becomes the 413 response.
                    raise ApiError(413, "payload_too_large", too_large)
                complete = not message.get("more_body", False)
            return message

        await app(scope, counted, send)

    return middleware


def _utf8_path(raw: bytes | None) -> bool:
    """The raw path, percent-decoded, is UTF-8 (True when the server gave none)."""
    if not raw:
        return True
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
