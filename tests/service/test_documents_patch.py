"""PATCH a document's metadata and count documents, through a real server: the patch re-embeds nothing (the
server's encoder calls are counted), filtered searches and counts see it once its job has succeeded, re-running
it changes nothing, and /index agrees with it about what changed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.service.conftest import wait_job
from tests.service.document_helpers import EncoderCalls, index, run_job, tiny_server

Server = tuple[httpx.Client, FastAPI]
LONG = " ".join(f"word{i} alpha beta gamma" for i in range(300))  # several passages


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[Server]:
    with tiny_server(tmp_path_factory.mktemp("vela-patch"), tiny_embedder_dir) as pair:
        yield pair


def _patch(client: httpx.Client, name: str, doc_id: str, body: dict[str, Any]) -> dict[str, Any]:
    job = run_job(client, client.patch(f"/collections/{name}/documents/{doc_id}", json=body))
    assert job["kind"] == "patch"
    return job


def _hits(client: httpx.Client, name: str, flt: dict[str, Any] | None, query: str = "alpha") -> list[str]:
    body = {"collection": name, "query": query, "mode": "bm25", "filter": flt, "k": 50}
    r = client.post("/search", json=body)
    assert r.status_code == 200, r.text
    return sorted(h["id"] for h in r.json()["hits"])


def _count(client: httpx.Client, name: str, flt: dict[str, Any] | None) -> int:
    r = client.post(f"/collections/{name}/count", json={"filter": flt})
    assert r.status_code == 200, r.text
    return int(r.json()["count"])


def _tag(value: str) -> dict[str, Any]:
    return {"must": [{"key": "tag", "match": {"value": value}}]}


def test_unset_removes_keys_as_qdrants_delete_payload(server: Server) -> None:
    client, _ = server
    name = "patch-unset"
    meta = {"tag": "red", "year": 2020, "note": "x", "keep": True}
    index(client, name, [{"id": "a", "text": "alpha", "metadata": meta}], schema={"fields": {"tag": "keyword"}})
    job = _patch(client, name, "a", {"unset": ["tag", "note", "never-there"]})
    assert job["status"] == "succeeded" and job["result"]["patched"] == 1
    assert client.get(f"/collections/{name}/documents/a").json()["metadata"] == {"year": 2020, "keep": True}
    assert _count(client, name, _tag("red")) == 0  # the committed index agrees: filters see the key gone
    job = _patch(client, name, "a", {"metadata": {"tag": "blue"}, "unset": ["keep"]})  # set some, remove others
    assert client.get(f"/collections/{name}/documents/a").json()["metadata"] == {"year": 2020, "tag": "blue"}
    assert _count(client, name, _tag("blue")) == 1
    assert _patch(client, name, "a", {"unset": ["keep"]})["result"]["unchanged"] == 1  # again: nothing to change


@pytest.mark.parametrize("shards", [1, 3])
def test_patch_changes_metadata_without_embedding_and_filters_see_it_after_its_job(
    server: Server, shards: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, app = server
    name = f"patch-{shards}"
    docs = [
        {"id": "a", "title": "A", "text": LONG, "metadata": {"tag": "old", "keep": 1}},
        {"id": "b", "text": "alpha and omega", "metadata": {"tag": "old"}},
    ]
    index(client, name, docs, shards=shards)
    before = client.get(f"/collections/{name}/documents/a").json()
    calls = EncoderCalls(app, name, monkeypatch)
    assert _hits(client, name, _tag("new")) == [] and _count(client, name, _tag("old")) == 2

    _patch(client, name, "a", {"metadata": {"tag": "new", "keep": None}})  # merge is the default
    after = client.get(f"/collections/{name}/documents/a").json()
    assert after["metadata"] == {"tag": "new", "keep": None}  # a key set to null stays, as null
    assert (after["title"], after["text"]) == ("A", LONG)
    spans = [(p["index"], p["start"], p["end"]) for p in after["passages"]]
    assert spans == [(p["index"], p["start"], p["end"]) for p in before["passages"]]
    assert min(p["id"] for p in after["passages"]) > max(p["id"] for p in before["passages"])
    assert _hits(client, name, _tag("new")) == ["a"] and _hits(client, name, _tag("old")) == ["b"]
    assert _count(client, name, _tag("new")) == 1 and _count(client, name, None) == 2
    assert _hits(client, name, {"must": [{"is_null": {"key": "keep"}}]}) == ["a"]
    # The old rows are tombstoned: an unfiltered search finds the new passages only.
    hit = client.post("/search", json={"collection": name, "query": "word299", "mode": "bm25"}).json()["hits"][0]
    assert hit["id"] == "a" and hit["passage"]["id"] in {p["id"] for p in after["passages"]}
    assert hit["metadata"] == {"tag": "new", "keep": None}

    _patch(client, name, "a", {"metadata": {"only": 1}, "mode": "replace"})
    assert client.get(f"/collections/{name}/documents/a").json()["metadata"] == {"only": 1}
    assert _hits(client, name, _tag("new")) == [] and _hits(
        client, name, {"must": [{"key": "only", "match": {"value": 1}}]}
    ) == ["a"]
    assert calls.texts == 0
    index(client, name, [{"id": "c", "text": "something new to embed"}])
    assert calls.texts > 0  # the counter does see the encoder


def test_patch_again_changes_nothing_and_index_agrees_about_what_changed(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, app = server
    name = "patch-hash"
    doc = {"id": "a", "title": "A", "text": LONG, "metadata": {"v": 1}}
    index(client, name, [doc])
    calls = EncoderCalls(app, name, monkeypatch)

    def pids() -> list[int]:
        return [p["id"] for p in client.get(f"/collections/{name}/documents/a").json()["passages"]]

    _patch(client, name, "a", {"metadata": {"v": 2}})
    patched = pids()
    _patch(client, name, "a", {"metadata": {"v": 2}})  # a re-run (at-least-once) finds nothing to change
    assert pids() == patched
    index(client, name, [{**doc, "metadata": {"v": 2}}])  # the same text, title and new metadata: unchanged
    assert pids() == patched
    index(client, name, [doc])  # the old metadata: changed back, still without embedding
    got = client.get(f"/collections/{name}/documents/a").json()
    assert got["metadata"] == {"v": 1} and [p["id"] for p in got["passages"]] != patched
    assert _hits(client, name, {"must": [{"key": "v", "match": {"value": 1}}]}) == ["a"]
    assert calls.texts == 0
    index(client, name, [{**doc, "text": LONG + " omega"}])  # new text: embedded
    assert calls.texts > 0


def test_patch_refuses_bad_input_before_queueing_anything(server: Server) -> None:
    client, _ = server
    name = "patch-bad"
    schema = {"fields": {"year": "integer"}, "strict": False}
    index(client, name, [{"id": "a", "text": "alpha", "metadata": {"year": 2020, "blob": "x" * 40_000}}], schema=schema)
    url = f"/collections/{name}/documents/a"

    def error(body: Any, path: str = url) -> tuple[int, str, str]:
        r = client.patch(path, json=body)
        return r.status_code, r.json()["error"]["code"], r.json()["error"]["message"]

    assert error({"metadata": {}}, f"/collections/{name}/documents/nope")[:2] == (404, "document_not_found")
    assert error({"metadata": {}}, "/collections/no-such/documents/a")[:2] == (404, "collection_not_found")
    status, code, message = error({"metadata": {"year": "2021"}})
    assert (status, code) == (422, "invalid_metadata") and message.startswith("metadata.year")
    status, code, message = error({"metadata": {"more": "y" * 40_000}})  # fits alone, not merged with the stored
    assert (status, code) == (422, "invalid_request") and "bytes" in message
    deep: dict[str, Any] = {}
    for _ in range(40):
        deep = {"d": deep}
    assert error({"metadata": deep})[:2] == (422, "invalid_request")
    for body in (
        {"metadata": {}, "mode": "upsert"},
        {"metadata": [1]},
        {"metadata": {}, "extra": 1},
        {},
        {"unset": []},
        {"unset": ["year"], "mode": "replace"},  # replace drops what it does not give
        {"metadata": {"year": 1}, "unset": ["year"]},  # set and removed: which?
        {"unset": "year"},
        {"unset": [""]},
    ):
        assert error(body)[:2] == (422, "invalid_request"), body
    got = client.get(url).json()
    assert got["metadata"] == {"year": 2020, "blob": "x" * 40_000}  # nothing was written


@pytest.mark.parametrize("shards", [1, 3])
def test_count_documents_of_the_committed_index_that_pass_a_filter(server: Server, shards: int) -> None:
    client, _ = server
    name = f"count-{shards}"
    docs = [{"id": f"d{i}", "text": LONG if i == 0 else f"doc {i}", "metadata": {"n": i}} for i in range(10)]
    index(client, name, docs, shards=shards)
    assert _count(client, name, None) == 10 and _count(client, name, {}) == 10  # a document counts once
    assert _count(client, name, {"must": [{"key": "n", "range": {"gte": 5}}]}) == 5
    assert _count(client, name, {"should": [{"key": "n", "match": {"any": [0, 1, 42]}}]}) == 2
    run_job(client, client.delete(f"/collections/{name}/documents/d0"))
    assert _count(client, name, {"must": [{"key": "n", "range": {"lt": 5}}]}) == 4
    r = client.post(f"/collections/{name}/count", json={"filter": {"must": [{"key": "n", "range": {"gte": "x"}}]}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_filter"
    assert r.json()["error"]["message"].startswith("filter.must[0].range.gte")
    r = client.post(f"/collections/{name}/count", json={"filter": None, "limit": 3})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    r = client.post("/collections/no-such/count", json={})
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"


def test_a_patch_sent_while_the_upsert_of_its_document_waits_runs_after_it(server: Server) -> None:
    # Writes run in the order sent: a PATCH right after the POST /index of a new document is accepted (it was a
    # 404 until the upsert had run), checked against the metadata that upsert sends, and applied after it.
    client, app = server
    name = "patch-after-queued-upsert"
    index(client, name, [{"id": "old", "text": "alpha", "metadata": {"tag": "a"}}])
    coll = app.state.vela.collections.get(name)
    with coll.writer():  # the next upsert's job cannot write until this ends: it is still queued or running
        r = client.post(
            "/index",
            json={
                "collection": name,
                "documents": [
                    {"id": "new", "text": "beta gamma", "metadata": {"tag": "b", "n": 1, "blob": "x" * 40_000}}
                ],
            },
        )
        assert r.status_code == 202, r.text
        upsert = r.json()["job_id"]
        url = f"/collections/{name}/documents/new"
        assert client.get(url).status_code == 404  # not stored yet
        patch = client.patch(url, json={"metadata": {"tag": "c"}})
        assert patch.status_code == 202, patch.text
        # Checked against what the queued upsert sends: merged with it, this would pass the byte limit.
        big = client.patch(url, json={"metadata": {"more": "y" * 40_000}})
        assert big.status_code == 422 and big.json()["error"]["code"] == "invalid_request"
        assert client.patch(f"/collections/{name}/documents/never", json={"metadata": {}}).status_code == 404
    assert wait_job(client, upsert)["status"] == "succeeded"
    assert wait_job(client, patch.json()["job_id"])["status"] == "succeeded"
    assert client.get(url).json()["metadata"] == {"tag": "c", "n": 1, "blob": "x" * 40_000}
