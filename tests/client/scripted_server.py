"""A tiny real HTTP server that answers from a script (status, headers, body), for the failures a healthy Vela
server does not give on demand: 503s to retry, plain-text errors, dropped connections, a probe that is not ready."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int  # 0: close the connection without answering
    body: Any = None  # JSON-encoded unless it is a str
    headers: dict[str, str] = field(default_factory=dict)


def vela_error(status: int, code: str, message: str = "scripted", **headers: str) -> Answer:
    """An answer in the API's error shape."""
    return Answer(status, {"error": {"code": code, "message": message, "request_id": "scripted-1"}}, headers)


@dataclass
class Script:
    """Answers given in order, one per request (the last one repeats); requests seen as (method, path, headers)."""

    answers: list[Answer]
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self, method: str, path: str, headers: dict[str, str]) -> Answer:
        with self._lock:
            self.seen.append((method, path, headers))
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            answer = script.next(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
            if answer.status == 0:
                self.close_connection = True
                return
            if isinstance(answer.body, str):
                payload, kind = answer.body.encode(), "text/plain"
            else:
                payload, kind = json.dumps(answer.body).encode(), "application/json"
            self.send_response(answer.status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    return Handler


@contextmanager
def scripted_server(*answers: Answer) -> Iterator[Script]:
    script = Script(list(answers))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
