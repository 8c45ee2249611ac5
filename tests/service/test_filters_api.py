"""Filters through HTTP: a collection with a schema, filtered search in every mode on 1 and 3 shards (the same
hits), pagination with offset, and malformed filters: each a 422 naming the fault's path, the server healthy after."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.indexing.test_filters import MALFORMED, SCHEMA
from tests.service.conftest import running_server, wait_job

JSON = {"Content-Type": "application/json"}
TOPICS = ["tides and the moon", "insulin and sugar", "magma under the crust", "carbon in the air"]


def _docs() -> list[dict[str, Any]]:
    out = []
    for i in range(40):
        md: dict[str, Any] = {
            "tenant": f"t{i % 3}",
            "year": 2000 + i % 9,
            "score": (i * 37 % 100) / 100,
            "ok": i % 2 == 0,
            "at": f"2024-{1 + i % 12:02d}-15T12:00:00Z",
            "tags": ["red"] if i % 4 == 0 else [],
        }
        text = f"Document {i} is about {TOPICS[i % 4]}. It also mentions {TOPICS[(i * 7) % 4]} once."
        out.append({"id": f"doc-{i:02d}", "title": f"Note {i}", "text": text, "metadata": md})
    return out


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("filters"), embedder=str(tiny_embedder_dir)) as c:
        for name, shards in (("one", 1), ("three", 3)):
            r = c.post("/index", json={"collection": name, "documents": _docs(), "schema": SCHEMA, "shards": shards})
            assert r.status_code == 202, r.text
            assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        yield c


FILTERS: list[dict[str, Any]] = [
    {"must": [{"key": "tenant", "match": {"value": "t1"}}]},
    {"must": [{"key": "year", "range": {"gte": 2003, "lt": 2006}}, {"key": "ok", "match": {"value": True}}]},
    {"must": [{"key": "at", "range": {"gte": "2024-03-01T00:00:00Z", "lt": "2024-07-01T00:00:00Z"}}]},
    {"should": [{"key": "tags", "match": {"any": ["red"]}}], "must_not": [{"key": "tenant", "match": {"value": "t0"}}]},
    {"has_id": ["doc-01", "doc-05", "doc-17", "doc-30", "no-such-doc"]},
    {"must": [{"has_id": ["doc-01", "doc-02", "doc-05"]}], "must_not": [{"key": "tenant", "match": {"value": "t2"}}]},
    {"must_not": [{"has_id": [f"doc-{i:02d}" for i in range(30)]}]},
    {"key": "tenant", "match": {"except": ["t0", "t1"]}},
    {"is_empty": {"key": "tags"}},
    {"key": "tags", "values_count": {"gte": 1}},
    {
        "min_should": {
            "conditions": [
                {"key": "tenant", "match": {"value": "t1"}},
                {"key": "ok", "match": {"value": True}},
                {"key": "year", "range": {"gte": 2005}},
            ],
            "min_count": 2,
        }
    },
]


def _search(c: httpx.Client, collection: str, mode: str, flt: Any, **extra: Any) -> list[dict[str, Any]]:
    body = {"collection": collection, "query": "moon tides sugar", "mode": mode, "k": 50, "filter": flt, **extra}
    r = c.post("/search", json=body)
    assert r.status_code == 200, r.text
    return list(r.json()["hits"])


def _passes(flt: dict[str, Any], doc: dict[str, Any]) -> bool:
    from indexing.filter_match import matches
    from indexing.filter_parser import parse_filter
    from indexing.filters import Schema

    node = parse_filter(flt, Schema.from_json(SCHEMA))
    return node is None or matches(node, doc["metadata"], doc["id"])


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_filtered_search_returns_only_passing_documents_alike_on_one_and_three_shards(
    client: httpx.Client, mode: str
) -> None:
    by_id = {d["id"]: d for d in _docs()}
    for flt in FILTERS:
        one = _search(client, "one", mode, flt)
        three = _search(client, "three", mode, flt)
        assert one, flt
        assert all(_passes(flt, by_id[h["id"]]) for h in one), flt
        assert [(h["id"], h["passage"]["id"]) for h in one] == [(h["id"], h["passage"]["id"]) for h in three], flt
        assert [h["score"] for h in one] == pytest.approx([h["score"] for h in three], abs=1e-6)
        if mode == "dense":  # every passing document has a passage: the dense list holds all of them
            assert {h["id"] for h in one} == {i for i, d in by_id.items() if _passes(flt, d)}


def test_counts_facets_and_scrolls_apply_every_condition_alike_on_one_and_three_shards(client: httpx.Client) -> None:
    docs = _docs()
    for flt in FILTERS:
        want = sorted(d["id"] for d in docs if _passes(flt, d))
        for name in ("one", "three"):
            r = client.post(f"/collections/{name}/count", json={"filter": flt})
            assert r.status_code == 200 and r.json()["count"] == len(want), (name, flt, r.text)
            r = client.post(f"/collections/{name}/facet", json={"key": "tenant", "filter": flt})
            assert r.status_code == 200, r.text
            assert sum(h["count"] for h in r.json()["hits"]) == len(want), (name, flt)
            r = client.get(f"/collections/{name}/documents", params={"filter": json.dumps(flt), "limit": 100})
            assert r.status_code == 200, r.text
            assert sorted(d["id"] for d in r.json()["documents"]) == want, (name, flt)


def test_delete_by_a_has_id_filter_deletes_those_documents(client: httpx.Client) -> None:
    for name, shards in (("del-one", 1), ("del-three", 3)):
        r = client.post("/index", json={"collection": name, "documents": _docs(), "schema": SCHEMA, "shards": shards})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        flt = {
            "must": [{"has_id": ["doc-03", "doc-04", "doc-39", "absent"]}],
            "must_not": [{"key": "ok", "match": {"value": False}}],
        }
        r = client.post(f"/collections/{name}/delete", json={"filter": flt})
        assert r.status_code == 202, r.text
        job = wait_job(client, r.json()["job_id"])
        assert job["status"] == "succeeded" and job["result"]["deleted"] == 1, job  # doc-04: the even one
        assert client.get(f"/collections/{name}/documents/doc-04").status_code == 404
        assert client.get(f"/collections/{name}/documents/doc-03").status_code == 200
        r = client.post(f"/collections/{name}/count", json={"filter": {"has_id": ["doc-03", "doc-04"]}})
        assert r.json()["count"] == 1


def test_offset_pages_the_fused_list(client: httpx.Client) -> None:
    full = _search(client, "one", "hybrid", None, k=12)
    pages = [_search(client, "one", "hybrid", None, k=4, offset=o) for o in (0, 4, 8)]
    assert [h["id"] for p in pages for h in p] == [h["id"] for h in full]


def test_the_collection_shows_its_schema(client: httpx.Client) -> None:
    r = client.get("/collections/one")
    assert r.json()["schema"]["fields"]["tenant"] == "keyword"


@pytest.mark.parametrize(("raw", "path"), MALFORMED)
def test_a_malformed_filter_is_a_422_naming_its_path(client: httpx.Client, raw: Any, path: str) -> None:
    r = client.post("/search", json={"collection": "one", "query": "moon", "filter": raw})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"]["code"] == "invalid_filter", body
    assert body["error"]["message"].startswith(path), body


@pytest.mark.parametrize("raw", [[], "tenant", 3, False, [{"key": "tenant"}]])
def test_a_filter_that_is_not_an_object_is_an_invalid_filter_on_every_route(client: httpx.Client, raw: Any) -> None:
    # docs/filters.md: every fault of a filter is a 422 invalid_filter naming its path; the request models took a
    # filter that was not an object for their own fault (invalid_request) on all but the scroll.
    sent = [
        client.post("/search", json={"collection": "one", "query": "moon", "filter": raw}),
        client.post("/search/batch", json={"collection": "one", "queries": ["moon"], "filter": raw}),
        client.post("/recommend", json={"collection": "one", "like": ["doc-00"], "filter": raw}),
        client.post("/collections/one/count", json={"filter": raw}),
        client.post("/collections/one/facet", json={"key": "tenant", "filter": raw}),
        client.post("/collections/one/delete", json={"filter": raw}),
        client.get("/collections/one/documents", params={"filter": json.dumps(raw)}),
    ]
    for r in sent:
        assert r.status_code == 422, (r.request.url, r.text)
        error = r.json()["error"]
        assert error["code"] == "invalid_filter", (r.request.url, error)
        assert error["message"].startswith("filter: expected an object"), (r.request.url, error)


def test_the_server_is_healthy_after_bad_filters(client: httpx.Client) -> None:
    for raw, _ in MALFORMED:
        client.post("/search/batch", json={"collection": "three", "queries": ["a", "b"], "filter": raw})
    assert client.get("/healthz").status_code == 200
    assert _search(client, "three", "hybrid", FILTERS[0])


NON_FINITE = [
    (b'{"key": "v", "match": {"value": Infinity}}', "filter.match.value"),
    (b'{"key": "v", "match": {"value": -1e400}}', "filter.match.value"),  # valid JSON, read as -inf
    (b'{"key": "v", "match": {"value": NaN}}', "filter.match.value"),
    (b'{"key": "v", "match": {"any": [1, 1e400]}}', "filter.match.any[1]"),
    (b'{"must": [{"key": "v", "match": {"except": [-1e400]}}]}', "filter.must[0].match.except[0]"),
    (b'{"key": "v", "range": {"gt": 1e400}}', "filter.range.gt"),
]


@pytest.mark.parametrize(("raw", "path"), NON_FINITE)
def test_a_non_finite_number_anywhere_in_a_filter_is_an_invalid_filter(
    client: httpx.Client, raw: bytes, path: str
) -> None:
    """docs/api.md: Infinity or NaN anywhere is a 422. A match value once took them (a range did not)."""
    body = b'{"collection": "one", "query": "moon", "filter": %s}' % raw
    sent = [
        client.post("/collections/one/count", content=b'{"filter": %s}' % raw, headers=JSON),
        client.post("/search", content=body, headers=JSON),
        client.post("/search/batch", content=body.replace(b'"query": "moon"', b'"queries": ["moon"]'), headers=JSON),
        client.get("/collections/one/documents", params={"filter": raw.decode()}),
    ]
    for r in sent:
        assert r.status_code == 422, (r.request.url, r.text)
        error = r.json()["error"]
        assert error["code"] == "invalid_filter" and error["message"].startswith(path), (r.request.url, error)


def test_index_refuses_metadata_of_the_wrong_type(client: httpx.Client) -> None:
    doc = {"id": "bad", "text": "a text", "metadata": {"year": "two thousand"}}
    r = client.post("/index", json={"collection": "one", "documents": [doc]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_metadata"
    assert "documents[0].metadata.year" in r.json()["error"]["message"]
    other = {"fields": {"tenant": "integer"}, "strict": False}
    r = client.post("/index", json={"collection": "one", "documents": [{"id": "x", "text": "t"}], "schema": other})
    assert r.status_code == 409, r.text


def _nested_docs() -> list[dict[str, Any]]:
    return [
        {
            "id": f"n{i}",
            "text": f"Paper {i} on {TOPICS[i % 4]}",
            "metadata": {
                "author": {"name": ["Ada", "Alan", "Grace"][i % 3], "born": 1800 + 10 * i},
                "refs": [{"year": 2000 + i}, {"year": 1990 + i % 5}],
            },
        }
        for i in range(12)
    ]


@pytest.mark.parametrize("shards", [1, 3])
def test_nested_fields_are_filtered_and_faceted_by_their_dotted_paths(client: httpx.Client, shards: int) -> None:
    name = f"nested-{shards}"
    schema = {"fields": {"author.name": "keyword", "author.born": "integer"}}
    r = client.post(
        "/index", json={"collection": name, "documents": _nested_docs(), "schema": schema, "shards": shards}
    )
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    flt = {"must": [{"key": "author.name", "match": {"value": "Ada"}}, {"key": "refs[].year", "range": {"gte": 2005}}]}
    want = ["n6", "n9"]  # Ada: 0, 3, 6, 9; a reference from 2005 on: 5 and later
    for mode in ("dense", "bm25", "hybrid"):
        hits = client.post("/search", json={"collection": name, "query": "paper", "mode": mode, "k": 20, "filter": flt})
        assert hits.status_code == 200, hits.text
        assert {h["id"] for h in hits.json()["hits"]} <= set(want), mode
    assert client.post(f"/collections/{name}/count", json={"filter": flt}).json()["count"] == 2
    facet = client.post(
        f"/collections/{name}/facet",
        json={"key": "author.name", "filter": {"key": "author.born", "range": {"lt": 1850}}},
    )
    assert facet.status_code == 200, facet.text
    assert {h["value"]: h["count"] for h in facet.json()["hits"]} == {"Ada": 2, "Alan": 2, "Grace": 1}
    bad = {"documents": [{"id": "x", "text": "t", "metadata": {"author": {"born": "long ago"}}}], "collection": name}
    r = client.post("/index", json=bad)
    assert r.status_code == 422 and "metadata.author.born" in r.json()["error"]["message"], r.text
    r = client.post(f"/collections/{name}/delete", json={"filter": {"key": "refs.year", "match": {"value": 1990}}})
    assert wait_job(client, r.json()["job_id"])["result"]["deleted"] == 3  # 0, 5, 10
    assert client.post(f"/collections/{name}/count", json={}).json()["count"] == 9
