"""POST /collections/{name}/delete: many documents in one job, by ids or by a metadata filter, through a
real server; searches, counts and scrolls agree once the job has succeeded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.service.document_helpers import index, run_job, scroll_all, tiny_server

Server = tuple[httpx.Client, FastAPI]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[Server]:
    with tiny_server(tmp_path_factory.mktemp("vela-delete"), tiny_embedder_dir) as pair:
        yield pair


def _docs(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"d{i:02d}", "text": f"note {i} alpha", "metadata": {"n": i, "tenant": ["acme", "globex"][i % 2]}}
        for i in range(n)
    ]


def _left(client: httpx.Client, name: str) -> list[str]:
    scrolled = [d["id"] for d in scroll_all(client, name)[0]]
    r = client.post("/search", json={"collection": name, "query": "alpha", "mode": "bm25", "k": 100})
    assert sorted(h["id"] for h in r.json()["hits"]) == scrolled  # the index agrees with the doc store
    assert client.post(f"/collections/{name}/count", json={}).json()["count"] == len(scrolled)
    assert client.post(f"/collections/{name}/count").json()["count"] == len(scrolled)  # no body: every document
    return scrolled


@pytest.mark.parametrize("shards", [1, 3])
def test_delete_by_ids_and_by_filter(server: Server, shards: int) -> None:
    client, _ = server
    name = f"many-{shards}"
    index(client, name, _docs(20), shards=shards)
    path = f"/collections/{name}/delete"
    job = run_job(client, client.post(path, json={"ids": ["d00", "d01", "d01", "no-such"]}))
    assert job["result"] == {"deleted": 2} and (job["done"], job["total"]) == (3, 3)
    assert _left(client, name) == [f"d{i:02d}" for i in range(2, 20)]
    flt = {"must": [{"key": "tenant", "match": {"value": "acme"}}, {"key": "n", "range": {"lt": 10}}]}
    job = run_job(client, client.post(path, json={"filter": flt}))
    assert job["kind"] == "delete_by_filter" and job["result"] == {"deleted": 4}  # d02 d04 d06 d08
    assert _left(client, name) == [f"d{i:02d}" for i in range(2, 20) if i >= 10 or i % 2]
    job = run_job(client, client.post(path, json={"filter": flt}))  # again: nothing left to match
    assert job["result"] == {"deleted": 0} and (job["done"], job["total"]) == (0, 0)


def test_delete_through_an_alias_and_its_refusals(server: Server) -> None:
    client, _ = server
    index(client, "target", _docs(4))
    assert client.put("/aliases/current", json={"collection": "target"}).status_code == 200
    job = run_job(client, client.post("/collections/current/delete", json={"ids": ["d00"]}))
    assert job["collection"] == "target" and _left(client, "target") == ["d01", "d02", "d03"]
    path = "/collections/target/delete"
    for body, code in [
        ({}, "invalid_request"),  # neither
        ({"filter": {}}, "invalid_request"),  # no "delete everything" by an empty filter
        ({"ids": []}, "invalid_request"),
        ({"ids": ["a"], "filter": {"must": []}}, "invalid_request"),  # both
        ({"ids": None, "filter": {"must": []}}, "invalid_request"),  # a null is not "not given"
        ({"filter": {"must": [{"key": "n", "match": {"nope": 1}}]}}, "invalid_filter"),
    ]:
        r = client.post(path, json=body)
        assert r.status_code == 422 and r.json()["error"]["code"] == code, (body, r.text)
        both = body.get("ids") is not None and body.get("filter")
        assert ("not both" in r.text) == bool(both), (body, r.text)  # the message says what was wrong
    job = run_job(client, client.post(path, json={"ids": ["no-such-a", "no-such-b"] * 5001}))  # repeats count once
    assert (job["total"], job["result"]) == (2, {"deleted": 0})
    r = client.post("/collections/no-such/delete", json={"ids": ["a"]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"
    assert _left(client, "target") == ["d01", "d02", "d03"]  # nothing refused was deleted
