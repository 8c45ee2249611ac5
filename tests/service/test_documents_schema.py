"""PUT /collections/{name}/schema: declaring metadata fields after documents are stored, through a real server.
Filters give the same answers before (a scan of the stored metadata) and after (typed columns); a strict schema
then refuses undeclared fields; values that do not fit fail the job, which names them and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from indexing.engine import LOCAL_FANOUT
from indexing.store import CollectionStore
from tests.service.document_helpers import index, run_job, scroll_all, tiny_server

Server = tuple[httpx.Client, FastAPI]
DECLARED = {"fields": {"year": "integer", "tenant": "keyword"}, "strict": True}
FILTERS: list[dict[str, Any]] = [
    {"must": [{"key": "year", "range": {"gte": 2015}}]},
    {
        "must": [{"key": "tenant", "match": {"any": ["acme", "initech"]}}],
        "must_not": [{"key": "year", "match": {"value": 2012}}],
    },
    {"should": [{"key": "year", "match": {"value": 2019}}, {"is_null": {"key": "tenant"}}]},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[Server]:
    with tiny_server(tmp_path_factory.mktemp("vela-schema"), tiny_embedder_dir) as pair:
        yield pair


def _docs() -> list[dict[str, Any]]:
    tenants = ["acme", "globex", "initech", None]
    return [
        {"id": f"d{i:02d}", "text": f"report {i} alpha", "metadata": {"year": 2010 + i % 12, "tenant": tenants[i % 4]}}
        for i in range(24)
    ]


def _answers(client: httpx.Client, name: str) -> list[tuple[list[str], int, list[str]]]:
    """Each filter's search hits, count and scroll."""
    out = []
    for flt in FILTERS:
        r = client.post("/search", json={"collection": name, "query": "alpha", "mode": "bm25", "k": 100, "filter": flt})
        assert r.status_code == 200, r.text
        count = client.post(f"/collections/{name}/count", json={"filter": flt}).json()["count"]
        scrolled, _ = scroll_all(client, name, limit=5, filter=flt)
        out.append((sorted(h["id"] for h in r.json()["hits"]), count, [d["id"] for d in scrolled]))
    return out


def _columns(app: FastAPI, name: str) -> set[tuple[str, str]]:
    """The typed columns every published segment of the collection holds."""
    coll = app.state.vela.collections.get(name)
    found = []
    for ref, version in zip(coll.shard_refs(), coll.published_versions(), strict=True):
        found += [set(seg.payload.columns) for seg in LOCAL_FANOUT.searcher(ref).view(version).segments]
    return set.intersection(*found) if found else set()


def _settings_files(app: FastAPI, name: str) -> list[Path]:
    root = app.state.vela.collections.get(name).root
    return [root / "collection.json", *sorted(root.glob("shards/s*/collection.json"))]


@pytest.mark.parametrize("shards", [1, 3])
def test_declaring_fields_later_gives_the_same_filter_answers_from_typed_columns(server: Server, shards: int) -> None:
    client, app = server
    name = f"declare-{shards}"
    index(client, name, _docs(), shards=shards)
    other = CollectionStore(app.state.vela.settings.data_dir.resolve())  # another process's view of the data dir
    elsewhere = other.get(name)
    before = _answers(client, name)
    assert all(hits and count == len(hits) and scrolled == hits for hits, count, scrolled in before)
    assert _columns(app, name) == set()

    job = run_job(client, client.put(f"/collections/{name}/schema", json=DECLARED))
    assert job["kind"] == "schema"
    assert client.get(f"/collections/{name}").json()["schema"] == DECLARED
    assert _answers(client, name) == before
    assert _columns(app, name) == {("year", "integer"), ("tenant", "keyword")}  # filters use the index
    files = _settings_files(app, name)
    assert len(files) == 1 + (shards if shards > 1 else 0)
    assert all(json.loads(f.read_text())["schema"] == DECLARED for f in files)
    # Another process reads the new settings on its next refresh (the background reader's tick).
    assert elsewhere.settings.schema == {"fields": {}, "strict": False}
    other.refresh(elsewhere)
    assert all(c.settings.schema == DECLARED for c in [elsewhere, *elsewhere.shard_list])
    elsewhere.close()

    # Strict: a filter naming an undeclared field is refused everywhere; declared types are checked.
    undeclared = {"must": [{"key": "color", "match": {"value": "red"}}]}
    for r in (
        client.post("/search", json={"collection": name, "query": "alpha", "filter": undeclared}),
        client.post(f"/collections/{name}/count", json={"filter": undeclared}),
        client.get(f"/collections/{name}/documents", params={"filter": json.dumps(undeclared)}),
    ):
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_filter", r.text
        assert "strict" in r.json()["error"]["message"]
    r = client.post(
        f"/collections/{name}/count", json={"filter": {"must": [{"key": "year", "match": {"value": "2019"}}]}}
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_filter"
    r = client.patch(f"/collections/{name}/documents/d01", json={"metadata": {"year": "2019"}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_metadata"
    bad_doc = {"id": "x", "text": "alpha", "metadata": {"year": "2019"}}
    r = client.post("/index", json={"collection": name, "documents": [bad_doc]})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_metadata"


def test_values_that_do_not_fit_fail_the_job_naming_documents_and_nothing_changes(server: Server) -> None:
    client, app = server
    name = "misfits"
    docs = [{"id": f"s{i:02d}", "text": "alpha", "metadata": {"year": f"{2000 + i}"}} for i in range(12)]
    docs += [{"id": f"n{i}", "text": "alpha", "metadata": {"year": 2000 + i}} for i in range(3)]
    index(client, name, docs)
    files = {f: f.read_bytes() for f in _settings_files(app, name)}
    job = run_job(client, client.put(f"/collections/{name}/schema", json={"fields": {"year": "integer"}}), "failed")
    assert "12 document(s)" in job["error"] and str([f"s{i:02d}" for i in range(10)]) in job["error"]
    assert "s10" not in job["error"] and "n0" not in job["error"]
    assert client.get(f"/collections/{name}").json()["schema"] == {"fields": {}, "strict": False}
    assert {f: f.read_bytes() for f in files} == files
    assert _columns(app, name) == set()
    # Declared as keyword instead, the strings fit (and the integers do not): the failure names only those.
    job = run_job(client, client.put(f"/collections/{name}/schema", json={"fields": {"year": "keyword"}}), "failed")
    assert "3 document(s)" in job["error"] and "['n0', 'n1', 'n2']" in job["error"]


def test_schema_request_errors(server: Server) -> None:
    client, _ = server
    index(client, "schema-bad", [{"id": "a", "text": "alpha"}])
    r = client.put("/collections/no-such/schema", json={"fields": {}})
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"
    bodies: list[Any] = [{"fields": {"year": "int"}}, {"fields": {}, "strict": "yes"}, {"fields": {}, "other": 1}, []]
    bodies += [{}, {"strict": True}]  # the whole new schema: an empty or cut body must not drop every field
    bodies += [{"fields": {name: "integer"}} for name in ("refs[].year", "a[]", "x[].y", "[]")]  # dotted paths only
    for body in bodies:
        r = client.put("/collections/schema-bad/schema", json=body)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", body
    assert client.get("/jobs", params={"collection": "schema-bad", "kind": "schema"}).json()["jobs"] == []


def test_a_field_named_with_the_list_mark_is_refused_before_anything_is_made(server: Server) -> None:
    """Filters read `refs[].year` as `refs.year`: a field declared so could never be named by one. It was a 500
    (PUT /collections, POST /index) or a job that failed (PUT .../schema)."""
    client, _ = server
    for name in ("refs[].year", "a[]", "x[].y", "[]"):
        doc = {"id": "a", "text": "alpha", "metadata": {"refs": [{"year": 2001}]}}
        r = client.post(
            "/index", json={"collection": "marked", "documents": [doc], "schema": {"fields": {name: "integer"}}}
        )
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
        assert repr(name) in r.json()["error"]["message"], r.text
    assert client.get("/collections/marked").status_code == 404
    assert client.get("/jobs", params={"collection": "marked"}).json()["jobs"] == []


def test_an_integer_no_float_holds_is_refused_for_a_float_field(server: Server) -> None:
    """10**400 is valid JSON. In a float field it once failed the job after the segment holding it was
    published, and every later load of the collection (search, listing, delete, the job runner) failed."""
    client, _ = server
    huge = 10**400
    body = {"collection": "floats", "schema": {"fields": {"score": "float"}}}
    index(client, "floats", [{"id": "a", "text": "alpha", "metadata": {"score": 1.5}}], schema=body["schema"])
    r = client.post("/index", json={**body, "documents": [{"id": "b", "text": "alpha", "metadata": {"score": huge}}]})
    assert r.status_code == 422 and "metadata.score" in r.json()["error"]["message"], r.text
    r = client.patch("/collections/floats/documents/a", json={"metadata": {"score": [2.5, huge]}})
    assert r.status_code == 422, r.text
    # Stored while undeclared, then declared: the schema job fails and changes nothing.
    index(client, "later", [{"id": "a", "text": "alpha", "metadata": {"score": huge}}])
    job = run_job(client, client.put("/collections/later/schema", json={"fields": {"score": "float"}}), "failed")
    assert "['a']" in job["error"]
    for name in ("floats", "later"):
        r = client.post("/search", json={"collection": name, "query": "alpha", "mode": "bm25"})
        assert r.status_code == 200 and [h["id"] for h in r.json()["hits"]] == ["a"]
    assert client.get("/collections").status_code == 200


def test_documents_that_do_not_fit_the_schema_they_come_with_make_no_collection(server: Server) -> None:
    client, _ = server
    body = {"collection": "never", "schema": {"fields": {"year": "integer"}}}
    r = client.post("/index", json={**body, "documents": [{"id": "a", "text": "alpha", "metadata": {"year": "x"}}]})
    assert r.status_code == 422, r.text
    assert client.get("/collections/never").status_code == 404
