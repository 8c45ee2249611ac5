"""What an outside client can send must never break the server: unhandled errors, non-finite numbers, odd API
keys, odd document ids, malformed bodies and oversized or deep metadata each get a clear answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException

from service import deps
from service.api_keys import key_refusal, require_key
from service.documents import submit_upsert
from service.settings import Settings
from tests.service.conftest import running_app, running_server, wait_job

DOCS = [
    {"id": "tides", "text": "Tides are caused by the gravity of the moon and the sun.", "metadata": {"topic": "sea"}},
    {"id": "leaves", "text": "Photosynthesis turns light, water and carbon dioxide into sugar."},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, FastAPI]]:
    with running_app(tmp_path_factory.mktemp("hard"), max_metadata_depth=8, max_metadata_keys=20) as (client, app):
        r = client.post("/index", json={"collection": "c", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        yield client, app


@pytest.fixture
def client(served: tuple[httpx.Client, FastAPI]) -> httpx.Client:
    return served[0]


def _json(client: httpx.Client, path: str, raw: bytes) -> httpx.Response:
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


# --- unhandled errors -------------------------------------------------------------------------------------------


def test_an_unhandled_error_is_a_500_in_the_error_shape_with_a_logged_request_id(
    served: tuple[httpx.Client, FastAPI], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    client, app = served

    def broken() -> list[str]:
        raise RuntimeError("secret detail of a bug")

    monkeypatch.setattr(app.state.vela.collections, "names", broken)
    with caplog.at_level(logging.ERROR, logger="vela.service"):
        r = client.get("/collections")
    assert r.status_code == 500 and r.headers["content-type"] == "application/json"
    err = r.json()["error"]
    assert err["code"] == "internal" and err["request_id"] == r.headers["x-request-id"]
    assert err["request_id"] in err["message"]
    assert "secret detail" not in r.text and "Traceback" not in r.text
    logged = [rec for rec in caplog.records if getattr(rec, "request_id", None) == err["request_id"]]
    assert logged and logged[0].exc_info is not None  # the traceback goes to the log, with the id
    monkeypatch.undo()
    assert client.get("/collections").status_code == 200


def test_every_response_has_a_request_id_and_a_plain_client_id_is_kept(client: httpx.Client) -> None:
    ids = {client.get("/healthz").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3
    assert client.get("/healthz", headers={"X-Request-ID": "trace-42"}).headers["x-request-id"] == "trace-42"
    odd = client.get("/healthz", headers={"X-Request-ID": "no spaces; or <tags>"}).headers["x-request-id"]
    assert odd != "no spaces; or <tags>"
    r = client.get("/collections/nope")
    assert r.json()["error"]["request_id"] == r.headers["x-request-id"]


# --- non-finite numbers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"collection": "c", "query": "moon", "weights": {"dense": Infinity, "bm25": 1}}',
        b'{"collection": "c", "query": "moon", "weights": {"dense": NaN}}',
        b'{"collection": "c", "query": "moon", "weights": {"bm25": -Infinity}}',
        b'{"collection": "c", "query": "moon", "rerank": {"max_ms": NaN}}',
        b'{"collection": "c", "query": "moon", "rerank": {"weight": Infinity}}',
    ],
)
def test_non_finite_numbers_are_refused(client: httpx.Client, raw: bytes) -> None:
    r = _json(client, "/search", raw)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_request" and "finite" in r.json()["error"]["message"]
    r = _json(client, "/search/batch", raw.replace(b'"query": "moon"', b'"queries": ["moon"]'))
    assert r.status_code == 422, r.text


def test_non_finite_numbers_in_metadata_are_refused(client: httpx.Client) -> None:
    raw = b'{"collection": "c", "documents": [{"id": "n", "text": "t", "metadata": {"x": [1, NaN]}}]}'
    r = _json(client, "/index", raw)
    assert r.status_code == 422 and "NaN or Infinity" in r.json()["error"]["message"]


# --- API keys ---------------------------------------------------------------------------------------------------


def test_non_ascii_api_keys_are_compared_as_bytes(tmp_path: Path) -> None:
    with running_server(tmp_path, api_keys="clé-1,k2") as client:
        for given in ("é".encode(), "clé-2".encode(), b"\xff\xfe", "clé-1".encode("latin-1")):
            for headers in ({b"X-API-Key": given}, {b"Authorization": b"Bearer " + given}):
                r = client.get("/collections", headers=headers)
                assert r.status_code == 401, (given, r.text)
                assert r.json()["error"]["code"] == "unauthorized"
        assert client.get("/collections", headers={b"X-API-Key": "clé-1".encode()}).status_code == 200
        assert client.get("/collections", headers={b"Authorization": b"Bearer " + "clé-1".encode()}).status_code == 200


HEADER_SETS = [
    [(b"authorization", b"Bearer k1")],
    [(b"x-api-key", b"k2")],
    [(b"x-api-key", b"k1"), (b"authorization", b"Bearer wrong")],  # one of each: X-API-Key is the one taken
    [(b"authorization", b"Basic azE6"), (b"x-api-key", b"k1")],
    [(b"authorization", b"Bearer k1"), (b"authorization", b"Bearer k2")],
    [(b"authorization", b"Bearer k1"), (b"authorization", b"Bearer wrong")],
    [(b"authorization", b"Bearer wrong"), (b"authorization", b"Bearer k1")],
    [(b"x-api-key", b"k1"), (b"x-api-key", b"k2")],
    [(b"x-api-key", b""), (b"x-api-key", b"k1")],
    [(b"authorization", b"Bearer wrong")],
    [],
]
TWO_HEADERS = {4, 5, 6, 7, 8}


@pytest.mark.parametrize("i", range(len(HEADER_SETS)))
def test_the_key_middleware_and_the_route_dependency_decide_alike(i: int) -> None:
    """Both read the key with the one function: with two Authorization headers, one took the last and the other
    the first. Two of either header are refused."""
    headers = HEADER_SETS[i]
    scope = {"type": "http", "method": "GET", "path": "/collections", "headers": headers, "query_string": b""}
    answered: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        answered.append(200)

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            answered.append(message["status"])

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    async def dependency() -> int:
        request = Request(scope)
        state = SimpleNamespace(settings=Settings(api_keys="k1,k2"))
        try:
            bearer, header = await deps._bearer(request), await deps._header(request)
            deps.require_api_key(request, state, bearer, header)  # type: ignore[arg-type]
        except HTTPException as exc:
            return exc.status_code
        return 200

    asyncio.run(require_key(app, keys=frozenset({"k1", "k2"}), public=frozenset())(scope, receive, send))
    assert answered == [asyncio.run(dependency())] == [200 if i < 4 else 401]
    if i in TWO_HEADERS:
        name = "Authorization" if headers[0][0] == b"authorization" else "X-API-Key"
        assert key_refusal(headers, frozenset({b"k1", b"k2"})) == f"more than one {name} header: send one API key"


def test_two_authorization_headers_are_refused_even_with_two_good_keys(tmp_path: Path) -> None:
    with running_server(tmp_path, api_keys="k1,k2") as client:
        for headers in (
            [("Authorization", "Bearer k1"), ("Authorization", "Bearer k2")],
            [("X-API-Key", "k1"), ("X-API-Key", "k2")],
        ):
            r = client.get("/collections", headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.text
            error = r.json()["error"]
            assert error["code"] == "unauthorized" and error["message"].startswith("more than one ")
            assert client.get("/healthz", headers=headers).status_code == 200  # a public path reads no key
        assert client.get("/collections", headers=[("X-API-Key", "k1"), ("Authorization", "Bearer k2")]).is_success


# --- document ids -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc_id", "path"),
    [
        ("a/b", "a/b"),  # sent as is
        ("x/y/z", "x%2Fy%2Fz"),  # slashes percent-encoded
        ("p%2Fq", "p%252Fq"),  # a literal "%2F" in the id
        ("/lead", "/lead"),
    ],
)
def test_a_document_id_with_a_slash_can_be_deleted(client: httpx.Client, doc_id: str, path: str) -> None:
    name = "ids"
    r = client.post("/index", json={"collection": name, "documents": [{"id": doc_id, "text": "moon and tides"}]})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    assert client.get(f"/collections/{name}").json()["documents"] == 1
    r = client.delete(f"/collections/{name}/documents/{path}")
    assert r.status_code == 202, r.text
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    assert client.get(f"/collections/{name}").json()["documents"] == 0


# --- malformed bodies -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b'{"collection": "c", "query": "caf\xe9"}', "not UTF-8"),
        (b"\xff\xfe\x00{", "not valid JSON"),  # a UTF-16 mark: decoded, then invalid
        (b'{"collection": "c", "query": "x", "weights": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested too deeply"),
        (b"[" * 100_000, "nested too deeply"),
        (b"{bad", "not valid JSON"),
    ],
)
def test_every_malformed_body_is_the_same_422(client: httpx.Client, raw: bytes, needle: str) -> None:
    r = _json(client, "/search", raw)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and needle in err["message"], err


# --- metadata ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "needle"),
    [
        (_nested(9), "nested 9 levels deep; the limit is 8"),
        (_nested(300), "nested 300 levels deep; the limit is 8"),
        ({"deep": [[[[[[[[1]]]]]]]]}, "nested 9 levels deep"),
        ({f"k{i}": i for i in range(21)}, "21 keys; the limit is 20"),
        ({"v": list(range(4097))}, "4097 values (each element of a list counts); the limit is 4096"),
        ({"a": {"b": [[0] * 2000, [None, "x"] * 1048], "c": True}}, "metadata has 4097 values"),
        ({"blob": "x" * 70_000}, "bytes as JSON; the limit is 65536"),
    ],
)
def test_metadata_out_of_bounds_is_422_and_nothing_is_written(
    client: httpx.Client, metadata: dict[str, Any], needle: str
) -> None:
    r = client.post(
        "/index", json={"collection": "meta", "documents": [{"id": "m", "text": "t", "metadata": metadata}]}
    )
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and needle in err["message"] and "documents.0.metadata" in err["message"]
    assert client.get("/collections/meta").status_code == 404


def test_metadata_within_bounds_is_stored_and_returned(client: httpx.Client) -> None:
    metadata = {"tags": ["a", "b"], "n": {"x": {"y": 1.5}}, **_nested(6)}
    r = client.post(
        "/index", json={"collection": "ok", "documents": [{"id": "m", "text": "moon", "metadata": metadata}]}
    )
    assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    hit = client.post("/search", json={"collection": "ok", "query": "moon"}).json()["hits"][0]
    assert hit["metadata"] == metadata


def test_stored_metadata_that_cannot_be_serialised_does_not_break_search(served: tuple[httpx.Client, FastAPI]) -> None:
    client, app = served
    # Written past the API's checks, as data from an older version would be.
    docs = [
        {"id": "deep", "text": "the deep sea floor", "metadata": _nested(400)},
        {"id": "nan", "text": "the sea at night", "metadata": {"depth_m": float("nan"), "ok": 1}},
    ]
    job = submit_upsert(state=app.state.vela, collection="stored", documents=docs)
    assert wait_job(client, job.id)["status"] == "succeeded"
    for mode in ("bm25", "dense", "hybrid"):
        r = client.post("/search", json={"collection": "stored", "query": "sea", "mode": mode})
        assert r.status_code == 200, r.text
        hits = {h["id"]: h for h in r.json()["hits"]}
        assert "nested deeper than 128 levels" in hits["deep"]["metadata"]["_error"]
        assert hits["nan"]["metadata"] == {"depth_m": None, "ok": 1}
    r = client.post("/search/batch", json={"collection": "stored", "queries": ["sea", "floor"]})
    assert r.status_code == 200, r.text


def test_a_model_name_too_long_for_the_filesystem_is_a_422(client: httpx.Client) -> None:
    r = client.post("/search", json={"collection": "c", "query": "moon", "rerank": {"model": "0" * 4000}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_model", r.text
    r = client.post(
        "/index", json={"collection": "long", "documents": [{"id": "a", "text": "t"}], "embedder": "0" * 4000}
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_model", r.text
