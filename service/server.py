"""The uvicorn server of the API, with its connection limits; `vela serve` and the tests build it here.

HTTP/1.1 is parsed by httptools (C, llhttp) when it is installed, as uvicorn's own `http="auto"` would choose,
else by h11 (pure Python, ~0.1 ms more CPU per request); either way with the header deadline below.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import socket
import struct
import time
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from service.settings import Settings

# The ASGI scope extension through which the app can drop a connection at once: the request deadline uses it on a
# download that has stalled. Closing the transport (what uvicorn does when a response is left unfinished) first
# sends everything buffered, so a client that has stopped reading would hold the connection and the buffer for ever.
ABORT_CONNECTION = "vela.abort_connection"
# Set in the scope's extensions when the request's path was longer than the parser reads (MAX_PARSED_URL): the app
# answers 414 in the API's error shape (service.middleware.request_guard) instead of the parser's bare 400.
URI_TOO_LONG = "vela.uri_too_long"
# Set in the scope's extensions to the perf_counter() of the moment the server read the request's headers, before
# the request's task first runs: the request guard's `wait` stage (service/timing.py) is the time from it to the
# task running, which under load is the event loop's backlog and would otherwise be in no stage, nor in `total`.
ARRIVED = "vela.arrived"


def _abort(transport: asyncio.Transport) -> None:
    """Drop the connection now: a reset (SO_LINGER 0), so that neither the transport's buffer nor the kernel's send
    buffer is kept for a peer that does not read (a plain close would go on sending them in the background)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class HeaderDeadline:
    """A deadline on request headers, for uvicorn's HTTP/1.1 protocols (mixed in before the protocol class).

    uvicorn times out only idle keep-alive connections, and stops that clock at the first byte: a client that
    connects and sends nothing, or a header line now and then, holds a connection for ever. Here a connection
    waiting for headers is closed once `header_timeout_s` has passed (bodies have their own timeout, in
    `service.middleware.limit_body`). A protocol says when it waits for headers (`awaiting_headers`)."""

    header_timeout_s = 10.0
    max_header_bytes = 1_048_576
    _header_timer: asyncio.TimerHandle | None = None
    _header_bytes = 0  # bytes received for the request whose headers are pending
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    def awaiting_headers(self) -> bool:
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if self.awaiting_headers():  # before the parser holds them: the head's bytes in this chunk, to its end
            end = data.find(b"\r\n\r\n")
            if self._header_bytes + (len(data) if end < 0 else end + 4) > self.max_header_bytes:
                self._refuse_headers()
                return
        super().data_received(data)  # type: ignore[misc]
        if self.transport.is_closing():
            return
        if self.cycle is not None:  # a request's task is made but has not run yet: it will find the extensions
            extensions = self.cycle.scope.setdefault("extensions", {})
            extensions.setdefault(ABORT_CONNECTION, partial(_abort, self.transport))
            extensions.setdefault(ARRIVED, now)  # this chunk ended the headers of the cycle's request
        if self.awaiting_headers():  # still (or again) in the headers of a request
            end = data.rfind(b"\r\n\r\n")  # a new request's head may start within this chunk
            self._header_bytes = self._header_bytes + len(data) if end < 0 else len(data) - end - 4
            self._arm()
        else:
            self._header_bytes = 0
            self._disarm()

    def _refuse_headers(self) -> None:
        """431 and close: the request line and headers are read into memory before any route or key check, so
        their size is bounded here (a 150 MB URL was read whole)."""
        self._disarm()
        body = json.dumps(
            {
                "error": {
                    "code": "headers_too_large",
                    "message": f"the request line and headers pass {self.max_header_bytes} bytes "
                    "(VELA_MAX_HEADER_BYTES): send large values in a body",
                }
            }
        ).encode()
        head = (
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        busy = self.cycle is not None and not self.cycle.response_complete
        if self.awaiting_headers() and not busy:
            self.transport.close()


class HeaderTimeoutProtocol(HeaderDeadline, H11Protocol):
    """uvicorn's h11 protocol with the header deadline."""

    def awaiting_headers(self) -> bool:
        return bool(self.conn.their_state is h11.IDLE)


MAX_PARSED_URL = 65_535  # the longest request target httptools.parse_url reads


def _httptools_protocol() -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with the header deadline; None without httptools."""
    if importlib.util.find_spec("httptools") is None:
        return None
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HttpToolsHeaderTimeoutProtocol(HeaderDeadline, HttpToolsProtocol):
        """The parser says where the headers end: a message begins (headers pending) at its first byte, and
        they are complete at `on_headers_complete`."""

        _headers_pending = True  # from the connection's start until the first request's headers are in

        def awaiting_headers(self) -> bool:
            return self._headers_pending and self.parser is not None

        def on_message_begin(self) -> None:
            self._headers_pending = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._headers_pending = False
            if len(self.url) <= MAX_PARSED_URL:
                super().on_headers_complete()
                return
            # httptools.parse_url stops at 64 KiB (16-bit offsets): a longer target would be a bare 400. As h11
            # does, it splits at the first "?", and the query (a large filter) is set on the scope before the
            # request's task first runs. A path that long names no route: the app is told to answer 414.
            path, _, query = self.url.partition(b"?")
            self.url = path if len(path) <= MAX_PARSED_URL else b"/"
            super().on_headers_complete()
            self.scope["query_string"] = query
            if len(path) > MAX_PARSED_URL:
                self.scope.setdefault("extensions", {})[URI_TOO_LONG] = {"bytes": len(path)}

    return HttpToolsHeaderTimeoutProtocol


class StopSignalServer(uvicorn.Server):
    """uvicorn's server that also calls `on_stop_signal` the moment it is told to stop (SIGTERM or SIGINT).

    uvicorn then drains the open connections, which may take long (a slow request, a large download), and only
    then runs the app's lifespan shutdown; what must stop at the signal itself, such as starting queued jobs
    (service.state.begin_stop), cannot wait for the lifespan. uvicorn installs `handle_exit` as its
    signal handler before the lifespan's startup, so this covers a signal during the start-up too. The callback
    runs inside the signal handler, on the main thread: it must only set flags or events."""

    def __init__(self, config: uvicorn.Config, on_stop_signal: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_stop_signal = on_stop_signal

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.on_stop_signal()
        super().handle_exit(sig, frame)


def uvicorn_config(
    app: Any, settings: Settings, *, host: str | None = None, port: int | None = None, **extra: Any
) -> uvicorn.Config:
    """Header and keep-alive timeouts and a cap on concurrent connections (uvicorn answers 503 beyond it)."""
    base = _httptools_protocol() or HeaderTimeoutProtocol
    limits = {"header_timeout_s": settings.header_timeout_s, "max_header_bytes": settings.max_header_bytes}
    protocol = type("VelaHTTPProtocol", (base,), limits)
    options: dict[str, Any] = {"log_config": None, "access_log": False, **extra}
    return uvicorn.Config(
        app,
        host=host or settings.host,
        port=port or settings.port,
        http=protocol,
        timeout_keep_alive=settings.keep_alive_s,
        # h11 refuses a head over 16 KiB by default (a bare 400); the head's bound is VELA_MAX_HEADER_BYTES (431)
        h11_max_incomplete_event_size=settings.max_header_bytes + 4,
        limit_concurrency=settings.max_connections,
        **options,
    )
