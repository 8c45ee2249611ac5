"""The HTTP protocol `vela serve` runs: httptools when it is installed (as uvicorn's "auto"), else h11, each with
the header deadline (tests/service/test_hardening_limits.py drives it over sockets with whichever is installed)."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import uvicorn

import service.server as server_mod
from service.middleware import request_guard
from service.server import HeaderTimeoutProtocol, _httptools_protocol, uvicorn_config
from service.settings import Settings
from tests.service.conftest import running_server


def test_the_protocol_is_httptools_when_installed_else_h11(tmp_path: Path) -> None:
    config = uvicorn_config(object(), Settings(data_dir=tmp_path, header_timeout_s=1.5), host="127.0.0.1", port=1)
    assert isinstance(config.http, type) and config.http.header_timeout_s == 1.5  # type: ignore[attr-defined]
    if importlib.util.find_spec("httptools") is None:
        assert issubclass(config.http, HeaderTimeoutProtocol)
    else:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        assert issubclass(config.http, HttpToolsProtocol)


def test_without_httptools_there_is_no_httptools_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "httptools" else real(name, *a))
    assert _httptools_protocol() is None


def _get_raw(client: Any, target: bytes) -> bytes:
    """The whole answer to a GET of `target`, sent over a socket of its own: httpx refuses URLs this long."""
    return _request_raw(client, b"GET", target)


def test_a_query_string_past_64_kib_reaches_the_app(tmp_path: Path) -> None:
    """httptools' URL parser stops at 64 KiB: the protocol splits the target itself, so a long filter gets the
    API's answer (as with h11), not a bare 400."""
    with running_server(tmp_path) as client:
        data = _get_raw(client, b"/collections/c/documents?filter=" + b"a" * 70_000)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] in (b"404", b"422") and json.loads(body)["error"]["code"], data[:300]


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_path_past_64_kib_is_414_in_the_error_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str
) -> None:
    """httptools cannot parse a path that long (it answered a bare text 400); h11 can, but no route has one. Either
    way the answer is the API's 414, with its request id, and the connection goes on serving."""
    if parser == "h11":
        monkeypatch.setattr(server_mod, "_httptools_protocol", lambda: None)
    with running_server(tmp_path) as client:
        for target in (b"/" + b"a" * 70_000, b"/collections/" + b"a" * 70_000 + b"?k=1"):  # past what httpx sends
            data = _get_raw(client, target)
            head, _, body = data.partition(b"\r\n\r\n")
            error = json.loads(body)["error"]
            assert head.split(b" ")[1] == b"414" and error["code"] == "uri_too_long", data[:300]
            assert b"x-request-id: " + error["request_id"].encode() in head.lower() and b"server-timing" in head
            assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_both_parsers_close_a_connection_that_does_not_finish_its_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str
) -> None:
    if parser == "h11":
        monkeypatch.setattr(server_mod, "_httptools_protocol", lambda: None)
    with running_server(tmp_path, header_timeout_s=0.3) as client:
        for partial in (b"", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1"):
            with socket.create_connection((client.base_url.host, client.base_url.port or 80), timeout=30) as sock:
                sock.sendall(partial)
                assert sock.recv(1024) == b""  # closed by the server (a hang would raise the timeout)
        for _ in range(2):  # a keep-alive connection still serves request after request
            assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("parser", ["httptools", pytest.param("h11", marks=pytest.mark.slow)])
def test_a_download_that_stalls_past_the_deadline_is_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str
) -> None:
    """A client that stops reading a large response: past the request deadline the server resets the connection
    (it used to keep it, with megabytes buffered for it, for as long as the client stayed)."""
    if parser == "h11":
        monkeypatch.setattr(server_mod, "_httptools_protocol", lambda: None)

    async def endless(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"1000000000")]})
        while True:
            await send({"type": "http.response.body", "body": b"y" * 65536, "more_body": True})

    app = request_guard(endless, timeout_s=1.0, window_s=0.5, min_bytes=256 * 1024)
    config = uvicorn_config(app, Settings(data_dir=tmp_path), host="127.0.0.1", port=_free_port())
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", config.port), timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
            time.sleep(4.0)  # stalled: past the deadline and its last window
            with pytest.raises(ConnectionResetError):
                while sock.recv(1 << 20):
                    pass
    finally:
        server.should_exit = True
        thread.join(10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_path_that_is_not_utf8_once_decoded_is_400_not_another_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str
) -> None:
    """The server decodes a path with U+FFFD for bytes that are not UTF-8: `/documents/%FF` read (or deleted) the
    document whose id is U+FFFD. Such a path is refused; a real U+FFFD, percent-encoded as UTF-8, still works."""
    if parser == "h11":
        monkeypatch.setattr(server_mod, "_httptools_protocol", lambda: None)
    with running_server(tmp_path) as client:
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "\ufffd", "text": "replacement"}]})
        deadline = time.monotonic() + 60
        while client.get(r.json()["url"]).json()["status"] != "succeeded" and time.monotonic() < deadline:
            time.sleep(0.05)
        for method in (b"GET", b"DELETE"):
            for target in (b"/collections/c/documents/%FF", b"/collections/%C3/documents/x", b"/collections/c%80"):
                data = _request_raw(client, method, target)
                head, _, body = data.partition(b"\r\n\r\n")
                assert head.split(b" ")[1] == b"400", data[:300]
                assert json.loads(body)["error"]["code"] == "invalid_path"
        ok = _request_raw(client, b"GET", b"/collections/c/documents/%EF%BF%BD")
        assert ok.split(b" ")[1] == b"200" and json.loads(ok.partition(b"\r\n\r\n")[2])["id"] == "\ufffd"


def _request_raw(client: Any, method: bytes, target: bytes) -> bytes:
    """The whole answer to `method target`, sent as bytes over a socket of its own (httpx would re-encode it)."""
    with socket.create_connection((client.base_url.host, client.base_url.port or 80), timeout=30) as sock:
        sock.sendall(method + b" " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data
