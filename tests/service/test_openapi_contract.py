"""The OpenAPI document says what the server does (security, 401, string bounds, 409, 405 with Allow), and with
API keys on, nothing private is public: metrics and docs can be put behind the key, and probes show no paths."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.schemas import NOT_BLANK
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


def test_security_is_declared_only_when_keys_are_on(tmp_path: Path) -> None:
    with running_server(tmp_path / "off") as client:
        spec = client.get("/openapi.json").json()
    assert "securitySchemes" not in spec.get("components", {})
    for key, op in _operations(spec).items():
        assert "security" not in op and "401" not in op["responses"], key

    with running_server(tmp_path / "on", api_keys="k1") as client:
        spec = client.get("/openapi.json").json()  # the docs are public unless VELA_PROTECT_DOCS is set
    ops = _operations(spec)
    assert set(ops) >= RESOURCE_OPERATIONS
    for key in RESOURCE_OPERATIONS:
        assert ops[key].get("security"), key
        assert ops[key]["responses"]["401"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorResponse"
        }, key
    for key in (("/healthz", "get"), ("/readyz", "get"), ("/metrics", "get")):
        assert "security" not in ops[key] and "401" not in ops[key]["responses"], key


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
        ("PATCH", "/healthz", "GET"),
        ("OPTIONS", "/collections/x", "DELETE, GET"),  # every route of the path, not only the first
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
