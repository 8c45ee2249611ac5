"""POST /collections/{name}/facet through a real server: value counts of declared fields, compared with the
counts a client would make from a scroll of the same documents, across shards, segments, multi-passage
documents, list values, filters, patches, upserts and deletes; and the refusals."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.service.document_helpers import index, run_job, scroll_all, tiny_server

Server = tuple[httpx.Client, FastAPI]
SCHEMA = {
    "fields": {"tenant": "keyword", "year": "integer", "open": "boolean", "tags": "keyword", "score": "float"},
    "strict": False,
}
TENANTS = ["acme", "globex", "initech", "umbrella"]
TAGS = ["red", "green", "blue", "grey"]
LONG = " ".join(f"word{i} tides moon" for i in range(300))  # several passages: a document still counts once


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[Server]:
    with tiny_server(tmp_path_factory.mktemp("vela-facets"), tiny_embedder_dir) as pair:
        yield pair


def _docs(rng: random.Random, start: int, n: int) -> list[dict[str, Any]]:
    docs = []
    for i in range(start, start + n):
        md: dict[str, Any] = {"year": 2015 + rng.randrange(6), "open": rng.random() < 0.5, "score": rng.random()}
        if rng.random() < 0.8:
            md["tenant"] = rng.choice(TENANTS)
        if rng.random() < 0.7:
            md["tags"] = rng.sample(TAGS, rng.randrange(1, 4))
        elif rng.random() < 0.5:
            md["tags"] = None
        text = LONG if i % 5 == 0 else f"note {i} about the moon"
        docs.append({"id": f"d{i:03d}", "text": text, "metadata": md})
    return docs


def _expected(client: httpx.Client, name: str, key: str, flt: dict[str, Any] | None) -> Counter[Any]:
    """The counts a client would make: every document the scroll returns, each distinct value once."""
    docs, _ = scroll_all(client, name, filter=flt)
    out: Counter[Any] = Counter()
    for d in docs:
        v = d["metadata"].get(key)
        for x in set(v if isinstance(v, list) else [v]) - {None}:
            out[x] += 1
    return out


def _facet(client: httpx.Client, name: str, key: str, **body: Any) -> dict[str, Any]:
    r = client.post(f"/collections/{name}/facet", json={"key": key, **body})
    assert r.status_code == 200, r.text
    return r.json()


def _check_all(client: httpx.Client, name: str) -> None:
    for flt in [
        None,
        {"must": [{"key": "year", "range": {"gte": 2017}}]},
        {"must": [{"key": "open", "match": {"value": True}}]},
    ]:
        for key in ("tenant", "year", "open", "tags"):
            got = _facet(client, name, key, filter=flt, limit=1000)
            want = _expected(client, name, key, flt)
            assert {h["value"]: h["count"] for h in got["hits"]} == dict(want), (key, flt)
            assert got["distinct_values"] == len(want)
            assert [h["count"] for h in got["hits"]] == sorted(want.values(), reverse=True)
            if key == "open":
                assert all(isinstance(h["value"], bool) for h in got["hits"])


@pytest.mark.parametrize("shards", [1, 3])
def test_facet_counts_match_a_scroll_through_writes(server: Server, shards: int) -> None:
    client, _ = server
    rng = random.Random(shards)
    name = f"facets-{shards}"
    index(client, name, _docs(rng, 0, 40), shards=shards, schema=SCHEMA)
    index(client, name, _docs(rng, 40, 30))  # a second segment per shard
    _check_all(client, name)

    # an upsert with new metadata, a patch, and a delete: counts follow each once its job has succeeded
    index(client, name, _docs(random.Random(99), 0, 10))
    patch = {"metadata": {"tenant": "acme", "tags": ["red", "red"]}, "mode": "merge"}
    run_job(client, client.patch(f"/collections/{name}/documents/d050", json=patch))
    run_job(client, client.delete(f"/collections/{name}/documents/d051"))
    run_job(
        client,
        client.post(
            f"/collections/{name}/delete", json={"filter": {"must": [{"key": "year", "match": {"value": 2015}}]}}
        ),
    )
    _check_all(client, name)


def test_limit_and_ties(server: Server) -> None:
    client, _ = server
    docs = [{"id": f"t{i}", "text": f"tie {i}", "metadata": {"tenant": t}} for i, t in enumerate("bbaacdd")]
    index(client, "facet-ties", docs, schema=SCHEMA)
    got = _facet(client, "facet-ties", "tenant", limit=3)
    assert got == {
        "key": "tenant",
        "hits": [{"value": "a", "count": 2}, {"value": "b", "count": 2}, {"value": "d", "count": 2}],
        "distinct_values": 4,
    }
    empty = _facet(client, "facet-ties", "tenant", filter={"must": [{"key": "tenant", "match": {"value": "zzz"}}]})
    assert empty == {"key": "tenant", "hits": [], "distinct_values": 0}


@pytest.mark.parametrize(
    ("body", "status", "code", "says"),
    [
        ({"key": "colour"}, 422, "invalid_facet", "not declared"),
        ({"key": "score"}, 422, "invalid_facet", "declared float"),
        ({"key": "tenant", "limit": 0}, 422, "invalid_request", "limit"),
        ({"key": "tenant", "limit": 1001}, 422, "invalid_request", "limit"),
        ({"key": ""}, 422, "invalid_request", "key"),
        (
            {"key": "tenant", "filter": {"must": [{"key": "year", "range": {"gte": "x"}}]}},
            422,
            "invalid_filter",
            "filter",
        ),
        ({"key": "tenant", "extra": 1}, 422, "invalid_request", "extra"),
    ],
)
def test_refusals(server: Server, body: dict[str, Any], status: int, code: str, says: str) -> None:
    client, _ = server
    index(client, "facet-refusals", [{"id": "a", "text": "x", "metadata": {"tenant": "t"}}], schema=SCHEMA)
    r = client.post("/collections/facet-refusals/facet", json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code and says in (err["message"] + str(err.get("details"))), err


def test_unknown_collection_is_404(server: Server) -> None:
    client, _ = server
    r = client.post("/collections/nope/facet", json={"key": "tenant"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"
