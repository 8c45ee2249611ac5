"""The request body: JSON in UTF-8 only, its Content-Type and Content-Encoding, its size; every refusal a
clear 4xx in the documented error shape."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from service.api.json_body import JsonRoute
from service.main import create_app
from service.settings import Settings
from tests.service.conftest import error_body


def test_malformed_json_is_422(small: httpx.Client) -> None:
    r = small.post("/search", content=b'{"collection": "c", "query": ', headers={"content-type": "application/json"})
    assert r.status_code == 422 and "request body is not valid JSON" in r.json()["error"]["message"]


UTF_BODY = '{"collection": "c", "query": "text"}'
OTHER_UTFS = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"collection": "c", "query": ', "request body is not valid JSON"),
        (b'{"collection": "c", "query": "\xff"}', "request body is not valid JSON: it is not UTF-8"),
        (b"[" * 40_000 + b"]" * 40_000, "request body is not valid JSON: it is nested too deeply"),
        (
            b'{"collection": "c", "query": "x", "k": ' + b"1" * 5000 + b"}",
            "request body holds an integer of more than 4,300 digits, which Vela does not read",
        ),
        # JSON in UTF-16 or UTF-32 (json.loads would detect and read them): only UTF-8 is read
        *[(UTF_BODY.encode(enc), "request body is not valid JSON: it is not UTF-8") for enc in OTHER_UTFS],
    ],
    ids=["syntax", "not-utf8", "too-deep", "huge-integer", *OTHER_UTFS],
)
def test_an_unparsable_body_is_422_with_details(small: httpx.Client, content: bytes, message: str) -> None:
    # Every 422 lists its problems (docs/api.md), a body the parser gives up on included.
    r = small.post("/search", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    err = error_body(r)
    assert err["code"] == "invalid_request" and err["message"] == message
    details = err["details"]
    assert isinstance(details, list) and details
    assert all(d["loc"] == [] and message in d["msg"] for d in details)  # no place in a body that is not JSON
    assert small.get("/healthz").status_code == 200


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig"])
def test_a_utf8_body_is_read_with_or_without_a_byte_order_mark(small: httpx.Client, encoding: str) -> None:
    r = small.post("/search", content=UTF_BODY.encode(encoding), headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["hits"][0]["id"] == "a", r.text


def test_every_route_reads_its_body_as_utf8_only(tmp_path: Path) -> None:
    """The UTF-8 check is the route class's: a router made without it would read UTF-16 and UTF-32 again."""
    routes = [c.original_route for c in iter_route_contexts(create_app(Settings(data_dir=tmp_path)).routes)]
    api_routes = [r for r in routes if isinstance(r, APIRoute)]
    assert len(api_routes) > 30 and all(isinstance(r, JsonRoute) for r in api_routes), [
        r.path for r in api_routes if not isinstance(r, JsonRoute)
    ]


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_json_sent_without_its_content_type_is_told_so(small: httpx.Client, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    for path in ("/search", "/index"):
        r = small.post(path, content=b'{"collection": "c", "query": "x"}', headers=headers)
        assert r.status_code == 422, r.text
        err = error_body(r)
        assert err["code"] == "invalid_request" and "Content-Type: application/json" in err["message"], err
        assert (repr(content_type) if content_type else "none was sent") in err["message"]


def test_request_body_over_the_limit_is_413(small: httpx.Client) -> None:
    docs = [{"id": str(i), "text": "x" * 900} for i in range(5)] * 30
    r = small.post("/index", json={"collection": "c", "documents": docs})
    assert r.status_code == 413 and r.json()["error"]["message"].startswith(
        "request body over 100000 bytes (VELA_MAX_REQUEST_BYTES): split a batch"
    )


@pytest.mark.parametrize(
    ("coding", "content"),
    [
        ("gzip", gzip.compress(UTF_BODY.encode())),  # compressed: was a "not UTF-8" 422
        ("br", UTF_BODY.encode()),  # labelled but plain: was read as plain JSON
        ("identity, gzip", gzip.compress(UTF_BODY.encode())),
        ("GZIP", gzip.compress(UTF_BODY.encode())),
    ],
)
def test_a_body_in_a_content_coding_is_415(small: httpx.Client, coding: str, content: bytes) -> None:
    """The server decodes no content coding: a body that declares one is refused as such, before it is read."""
    for path in ("/search", "/index", "/snapshots/upload?into=x"):
        headers = {"content-type": "application/json", "content-encoding": coding}
        r = small.post(path, content=content, headers=headers)
        assert r.status_code == 415 and r.headers["accept-encoding"] == "identity", r.text
        err = error_body(r)
        assert err["code"] == "unsupported_encoding" and "Content-Encoding" in err["message"], err
        assert repr(coding.lower().removeprefix("identity, ")) in err["message"]


def test_a_body_declared_identity_is_read_as_it_is(small: httpx.Client) -> None:
    headers = {"content-type": "application/json", "content-encoding": "identity"}
    r = small.post("/search", content=UTF_BODY.encode(), headers=headers)
    assert r.status_code == 200 and r.json()["hits"][0]["id"] == "a", r.text
