"""The OpenAPI document says what the server does (security, 401, string bounds, 409, 405 with Allow), and with
API keys on, nothing private is public: metrics and docs can be put behind the key, and probes show no paths."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from service.openapi import install_openapi
from service.schemas import NOT_BLANK, ErrorResponse
from tests.service.conftest import running_server, wait_job

RESOURCE_OPERATIONS = {
    ("/index", "post"),
    ("/jobs/{job_id}", "get"),
    ("/jobs/{job_id}", "delete"),
    ("/collections", "get"),
    ("/collections/{name}", "get"),
    ("/collections/{name}", "delete"),
    ("/collections/{name}/documents/{doc_id}", "delete"),
    ("/search", "post"),
    ("/search/batch", "post"),
}


def _operations(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(path, method): op for path, ops in spec["paths"].items() for method, op in ops.items()}


def _schema(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(spec["components"]["schemas"][name])


ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}
# Operations FastAPI gave its own 422 (HTTPValidationError) before the document was rewritten.
DEFAULT_422_OPERATIONS = {
    ("/jobs/{job_id}", "get"),
    ("/jobs/{job_id}", "delete"),
    ("/jobs/{job_id}/retry", "post"),
    ("/collections/{name}", "get"),
    ("/collections/{name}", "delete"),
    ("/collections/{name}/promote", "post"),
    ("/collections/{name}/rollback", "post"),
    ("/collections/{name}/documents/{doc_id}", "delete"),
}


def _assert_every_422_is_the_error_model(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """No trace of FastAPI's {"detail": [...]} shape, which the server never sends; the declared 422s."""
    text = json.dumps(spec)
    assert "HTTPValidationError" not in text and "#/components/schemas/ValidationError" not in text
    assert not {"HTTPValidationError", "ValidationError"} & set(spec["components"]["schemas"])
    declared = {key: op["responses"]["422"] for key, op in _operations(spec).items() if "422" in op["responses"]}
    for key, response in declared.items():
        assert response["content"] == {"application/json": {"schema": ERROR_REF}}, key
    return declared


def test_security_is_declared_only_when_keys_are_on(tmp_path: Path) -> None:
    with running_server(tmp_path / "off") as client:
        spec = client.get("/openapi.json").json()
    _assert_every_422_is_the_error_model(spec)
    assert "securitySchemes" not in spec.get("components", {})
    for key, op in _operations(spec).items():
        assert "security" not in op and "401" not in op["responses"], key

    with running_server(tmp_path / "on", api_keys="k1") as client:
        spec = client.get("/openapi.json").json()  # the docs are public unless VELA_PROTECT_DOCS is set
    _assert_every_422_is_the_error_model(spec)
    ops = _operations(spec)
    assert set(ops) >= RESOURCE_OPERATIONS
    for key in RESOURCE_OPERATIONS:
        assert ops[key].get("security"), key
        assert ops[key]["responses"]["401"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorResponse"
        }, key
    for key in (("/healthz", "get"), ("/readyz", "get"), ("/metrics", "get")):
        assert "security" not in ops[key] and "401" not in ops[key]["responses"], key


def test_every_422_is_declared_as_the_error_the_server_sends(server: httpx.Client) -> None:
    spec = server.get("/openapi.json").json()
    declared = _assert_every_422_is_the_error_model(spec)
    assert set(declared) >= DEFAULT_422_OPERATIONS | {("/search", "post"), ("/index", "post")}
    assert server.get("/openapi.json").json() == spec  # served from the cache, rewritten once
    # What the document declares is what comes: a validation error and a check after it, both in ErrorResponse.
    for r in (server.get("/aliases/not%20a%20name"), server.post("/search", json={"collection": "c", "query": ""})):
        assert r.status_code == 422, r.text
        body = ErrorResponse.model_validate(r.json())
        assert body.error.code == "invalid_request" and body.error.details, r.text


def test_the_rewrite_adds_the_error_model_where_no_route_declared_it() -> None:
    app = FastAPI()

    @app.get("/things/{thing_id}")
    def _thing(thing_id: int) -> dict[str, int]:
        return {"id": thing_id}

    install_openapi(app)
    spec = app.openapi()
    declared = _assert_every_422_is_the_error_model(spec)
    assert set(declared) == {("/things/{thing_id}", "get")}
    assert {"ErrorResponse", "ErrorBody"} <= set(spec["components"]["schemas"])
    assert spec["components"]["schemas"]["ErrorResponse"]["properties"]["error"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }
    assert app.openapi() is spec

    @app.get("/more/{n}")  # a route added later: FastAPI generates a new document, rewritten in turn
    def _more(n: int) -> dict[str, int]:
        return {"n": n}

    assert set(_assert_every_422_is_the_error_model(app.openapi())) == {
        ("/things/{thing_id}", "get"),
        ("/more/{n}", "get"),
    }


def test_string_bounds_are_in_the_schema(server: httpx.Client) -> None:
    spec = server.get("/openapi.json").json()
    query = _schema(spec, "SearchRequest")["properties"]["query"]
    assert query["minLength"] == 1 and query["maxLength"] == 10_000 and query["pattern"] == NOT_BLANK
    item = _schema(spec, "BatchSearchRequest")["properties"]["queries"]["items"]
    assert item["minLength"] == 1 and item["maxLength"] == 10_000 and item["pattern"] == NOT_BLANK
    text = _schema(spec, "Document")["properties"]["text"]
    assert text["minLength"] == 1 and text["pattern"] == NOT_BLANK
    # What the pattern calls blank, the server refuses, and what it accepts, the server takes.
    for blank in (" ", "\t\n", "\u3000\u00a0", "\x1c\x1f"):
        assert not re.search(NOT_BLANK, blank)
        assert server.post("/search", json={"collection": "c", "query": blank}).status_code == 422
    assert re.search(NOT_BLANK, " x ")


def test_cancelling_an_ended_job_is_a_documented_409(server: httpx.Client) -> None:
    r = server.post("/index", json={"collection": "jobs409", "documents": [{"id": "a", "text": "moon"}]})
    job_id = r.json()["job_id"]
    assert wait_job(server, job_id)["status"] == "succeeded"
    r = server.delete(f"/jobs/{job_id}")
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "conflict" and "already ended (succeeded)" in r.json()["error"]["message"]
    assert server.get(f"/jobs/{job_id}").json()["status"] == "succeeded"
    assert server.delete("/jobs/no-such-job").status_code == 404
    spec = server.get("/openapi.json").json()
    assert "409" in _operations(spec)[("/jobs/{job_id}", "delete")]["responses"]


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("TRACE", "/search", "POST"),
        ("PUT", "/collections", "GET"),
        ("PATCH", "/healthz", "GET, HEAD"),
        ("OPTIONS", "/collections/x", "DELETE, GET, HEAD, PUT"),  # every route of the path, not only the first
        ("POST", "/jobs/j1", "DELETE, GET"),
    ],
)
def test_a_method_that_is_not_allowed_is_405_with_allow(
    server: httpx.Client, method: str, path: str, allow: str
) -> None:
    r = server.request(method, path)
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    assert r.headers["allow"] == allow


# --- information without a key ----------------------------------------------------------------------------------


def test_probes_show_no_paths(tmp_path: Path) -> None:
    with running_server(tmp_path, api_keys="k1") as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["embedders"] == 1
        assert str(tmp_path) not in ready.text and "site-packages" not in ready.text and "/" not in ready.text


def test_metrics_and_docs_are_public_by_default(tmp_path: Path) -> None:
    with running_server(tmp_path, api_keys="k1") as client:
        for path in ("/metrics", "/docs", "/openapi.json", "/healthz", "/readyz"):
            assert client.get(path).status_code == 200, path
        assert client.get("/collections").status_code == 401


def test_metrics_and_docs_can_be_put_behind_the_key(tmp_path: Path) -> None:
    with running_server(tmp_path, api_keys="k1", protect_metrics=True, protect_docs=True) as client:
        r = client.post("/index", json={"collection": "private", "documents": [{"id": "a", "text": "t"}]})
        assert r.status_code == 401
        for path in ("/metrics", "/docs", "/redoc", "/openapi.json"):
            r = client.get(path)
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", path
            assert client.get(path, headers={"X-API-Key": "k1"}).status_code == 200, path
        for path in ("/healthz", "/readyz"):
            assert client.get(path).status_code == 200, path
        spec = client.get("/openapi.json", headers={"X-API-Key": "k1"}).json()
        assert _operations(spec)[("/metrics", "get")].get("security")


def test_every_body_can_be_413_and_408_and_every_operation_503(server: httpx.Client) -> None:
    # The request guard and the limits answer these on any route: the document says so (count, facet, a
    # document's PATCH and the schema's PUT declared no 413 although the server sends one).
    spec = server.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            assert "503" in statuses, (path, method)
            if "requestBody" in operation:
                assert {"408", "413"} <= statuses, (path, method)


def test_jobs_may_be_507_searches_409_and_every_error_has_the_error_model(server: httpx.Client) -> None:
    # A full disk refuses every job (507) and a model gone refuses searches (409): the document declared neither,
    # and /readyz's 503 had no body schema, though it is sent in the error shape.
    spec = server.get("/openapi.json").json()
    queued = 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            if "202" in responses:
                queued += 1
                assert "507" in responses, (method, path)
            for status, response in responses.items():
                if status >= "400":
                    assert "content" in response, (method, path, status)
    assert queued >= 10
    for path in ("/search", "/search/batch"):
        assert "409" in spec["paths"][path]["post"]["responses"]
    # Every write whose job would load the collection's model is refused 409 model_unavailable when it does not
    # load; the document declared it for none of these. An empty collection is made on a disk with room only.
    operations = _operations(spec)
    for path, method in (
        ("/index", "post"),
        ("/collections/{name}/documents/{doc_id}", "patch"),
        ("/collections/{name}/documents/{doc_id}", "delete"),
        ("/collections/{name}/delete", "post"),
        ("/collections/{name}/schema", "put"),
    ):
        assert "409" in operations[(path, method)]["responses"], (method, path)
    assert "507" in operations[("/collections/{name}", "put")]["responses"]


def test_what_any_operation_may_answer_is_declared_on_every_one(server: httpx.Client) -> None:
    """A declared body over the limit is 413 on a GET too, as is a declared content coding 415, and any operation
    can fail with a 500 or a 503: the document said so only for some."""
    spec = server.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            assert {"413", "415", "500", "503"} <= set(operation["responses"]), (method, path)
    for head, status, code in (
        (b"Content-Length: 300000000", b"413", b'"payload_too_large"'),
        (b"Content-Encoding: gzip", b"415", b'"unsupported_encoding"'),
    ):
        with socket.create_connection((server.base_url.host, server.base_url.port or 80), timeout=30) as sock:
            sock.sendall(b"GET /collections HTTP/1.1\r\nHost: x\r\n" + head + b"\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        assert data.split(b" ")[1] == status and code in data, data[:200]
    metrics = spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]
    head = server.head("/metrics")
    assert head.status_code == 200 and head.headers["content-type"].startswith("text/plain") and not head.content
