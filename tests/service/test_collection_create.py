"""PUT /collections/{name}: an empty collection with its settings before any document, searched, counted and
written like any other; the same PUT again is answered 200, one with other settings or on an alias is a 409."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import running_server, wait_job

SCHEMA = {"fields": {"tenant": "keyword"}, "strict": True}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("create"), embedder=str(tiny_embedder_dir)) as c:
        yield c


def test_an_empty_collection_is_made_with_its_settings_and_serves_at_once(client: httpx.Client) -> None:
    r = client.put("/collections/fresh", json={"schema": SCHEMA, "shards": 2})
    assert r.status_code == 201, r.text
    assert (r.json()["name"], r.json()["documents"], r.json()["shards"]) == ("fresh", 0, 2)
    assert client.get("/collections/fresh").json()["schema"] == SCHEMA
    for mode in ("dense", "bm25", "hybrid"):
        r = client.post("/search", json={"collection": "fresh", "query": "tides", "mode": mode})
        assert r.status_code == 200 and r.json()["hits"] == [], r.text
    assert client.post("/collections/fresh/count", json={}).json() == {"count": 0}
    assert client.get("/collections/fresh/documents").json()["documents"] == []
    bad = {"filter": {"key": "year", "match": {"value": 1}}}  # the strict schema is in force before any document
    assert client.post("/collections/fresh/count", json=bad).status_code == 422
    assert client.put("/aliases/fresh-live", json={"collection": "fresh"}).status_code == 200
    doc = {"id": "d1", "text": "tides and the moon", "metadata": {"tenant": "acme"}}
    r = client.post("/index", json={"collection": "fresh-live", "documents": [doc]})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    hits = client.post("/search", json={"collection": "fresh", "query": "tides"}).json()["hits"]
    assert [h["id"] for h in hits] == ["d1"]


def test_the_same_put_again_is_answered_as_it_is_and_other_settings_are_a_conflict(client: httpx.Client) -> None:
    assert client.put("/collections/again", json={"shards": 2}).status_code == 201
    same = client.put("/collections/again", json={"shards": 2})
    assert same.status_code == 200 and same.json()["shards"] == 2
    assert client.put("/collections/again").status_code == 200  # nothing asked: nothing differs
    other = client.put("/collections/again", json={"shards": 3})
    assert other.status_code == 409 and other.json()["error"]["code"] == "conflict"
    assert client.put("/collections/again", json={"schema": SCHEMA}).status_code == 409
    assert client.put("/aliases/again-alias", json={"collection": "again"}).status_code == 200
    alias = client.put("/collections/again-alias")
    assert alias.status_code == 409 and "alias" in alias.json()["error"]["message"]


@pytest.mark.parametrize(
    ("name", "body", "code"),
    [
        ("bad name", {}, "invalid_request"),
        ("-dash-first", {}, "invalid_request"),
        ("ok", {"shards": 0}, "invalid_request"),
        ("ok", {"embedder": "no-such-model"}, "unknown_model"),
        ("ok", {"schema": {"fields": {"x": "text"}}}, "invalid_request"),
        ("ok", {"dims": 3}, "invalid_request"),
        ("ok", {"schema": {"fields": {"refs[].year": "integer"}}}, "invalid_request"),  # declared as refs.year
        ("ok", {"schema": {"fields": {"[]": "keyword"}}}, "invalid_request"),
    ],
)
def test_a_bad_create_is_a_422_and_makes_nothing(client: httpx.Client, name: str, body: dict, code: str) -> None:
    r = client.put(f"/collections/{name}", json=body)
    assert r.status_code == 422 and r.json()["error"]["code"] == code, r.text
    assert client.get("/collections/ok").status_code == 404
