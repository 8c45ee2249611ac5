"""A real HTTP proxy in front of a Vela server with a body limit of its own, as nginx's `client_max_body_size`
would be, answering a plain-text 413 the way a proxy does; it can also hide `GET /limits`, as a server older than
that route would. What `index_in_batches` meets when the limits it reads are not the whole story."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Proxy:
    url: str = ""
    bodies: list[int] = field(default_factory=list)  # the size of every body it was sent (refused ones too)
    refused: int = 0


def _handler(proxy: Proxy, upstream: str, max_body: int, hide_limits: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _plain(self, status: int, text: str) -> None:
            payload = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            proxy.bodies.append(len(body))
            if len(body) > max_body:
                proxy.refused += 1
                self._plain(413, "<html><body><h1>413 Request Entity Too Large</h1></body></html>")
                return
            if hide_limits and self.path.split("?")[0] == "/limits":
                self._plain(404, "not found")
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            answer = httpx.request(self.command, upstream + self.path, headers=headers, content=body, timeout=60)
            self.send_response(answer.status_code)
            for name, value in answer.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _forward

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    return Handler


@contextmanager
def limiting_proxy(upstream: str, *, max_body: int, hide_limits: bool = False) -> Iterator[Proxy]:
    proxy = Proxy()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy, upstream.rstrip("/"), max_body, hide_limits))
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
