"""GET one document and the scroll over a collection's documents, through a real server: exactly what was indexed
comes back, pages follow id order with opaque cursors and bounded work, and a scroll visits every document once
while writers upsert, add and delete documents through the API."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI

from tests.service.document_helpers import index, run_job, scroll_all, tiny_server

Server = tuple[httpx.Client, FastAPI]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[Server]:
    with tiny_server(tmp_path_factory.mktemp("vela-docs"), tiny_embedder_dir) as pair:
        yield pair


def _numbered(n: int, prefix: str = "d") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i:02d}", "text": f"document {i} about topic{i % 3}", "metadata": {"n": i, "even": i % 2 == 0}}
        for i in range(n)
    ]


@pytest.mark.parametrize("shards", [1, 3])
def test_get_returns_the_document_exactly_as_indexed_with_its_passages(server: Server, shards: int) -> None:
    client, _ = server
    name = f"get-{shards}"
    long_text = " ".join(f"word{i} alpha beta gamma" for i in range(400))  # several passages
    odd_id = "dir/sub file?x=1#frag"
    metadata: dict[str, Any] = {
        "tenant": "acme",
        "tags": ["a", "b"],
        "nested": {"k": [1, 2.5, None]},
        "note": "é✓",
        "gone": None,
    }
    docs: list[dict[str, Any]] = [
        {"id": odd_id, "title": "A title", "text": long_text, "metadata": metadata},
        {"id": "plain", "text": "no title, no metadata"},
    ]
    index(client, name, docs, shards=shards)
    got = client.get(f"/collections/{name}/documents/{quote(odd_id, safe='')}").json()
    assert {k: got[k] for k in ("id", "title", "text", "metadata")} == {
        "id": odd_id,
        "title": "A title",
        "text": long_text,
        "metadata": metadata,
    }
    passages = got["passages"]
    assert len(passages) > 1 and [p["index"] for p in passages] == list(range(len(passages)))
    assert passages[0]["start"] == 0 and passages[-1]["end"] == len(long_text)
    assert all(p["start"] < p["end"] for p in passages)
    # The passage ids are those searches report.
    hit = client.post("/search", json={"collection": name, "query": "word399", "mode": "bm25"}).json()["hits"][0]
    assert hit["id"] == odd_id and hit["passage"]["id"] in {p["id"] for p in passages}
    plain = client.get(f"/collections/{name}/documents/plain").json()
    assert (plain["title"], plain["metadata"], len(plain["passages"])) == ("", {}, 1)


def test_get_unknown_document_or_collection_is_404(server: Server) -> None:
    client, _ = server
    index(client, "get-404", _numbered(1))
    r = client.get("/collections/get-404/documents/nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "document_not_found"
    r = client.get("/collections/no-such/documents/d00")
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"
    # A deleted document is gone for GET too.
    run_job(client, client.delete("/collections/get-404/documents/d00"))
    assert client.get("/collections/get-404/documents/d00").status_code == 404


@pytest.mark.parametrize("shards", [1, 3])
def test_scroll_pages_follow_id_order_and_filters_use_the_stored_metadata(server: Server, shards: int) -> None:
    client, _ = server
    name = f"scroll-{shards}"
    docs = _numbered(23)
    index(client, name, list(reversed(docs)), shards=shards)  # indexing order does not matter
    got, sizes = scroll_all(client, name, limit=5)
    assert [d["id"] for d in got] == [d["id"] for d in docs]
    assert sizes == [5, 5, 5, 5, 3]
    assert got[7] == {k: docs[7].get(k, "") for k in ("id", "title", "text", "metadata")}
    even = {"must": [{"key": "even", "match": {"value": True}}], "must_not": [{"key": "n", "range": {"gte": 20}}]}
    got, _ = scroll_all(client, name, limit=4, filter=even)
    assert [d["id"] for d in got] == [f"d{i:02d}" for i in range(0, 20, 2)]
    one_page = client.get(f"/collections/{name}/documents", params={"limit": 1000}).json()
    assert len(one_page["documents"]) == 23 and one_page["next_cursor"] is None


def test_a_page_scans_at_most_ten_documents_per_document_it_may_return(server: Server) -> None:
    client, _ = server
    index(client, "sparse", _numbered(30))
    rare = {"must": [{"key": "n", "match": {"value": 25}}]}
    got, sizes = scroll_all(client, "sparse", limit=1, filter=rare)
    # limit 1: each page scans 10 documents; empty pages carry a cursor, and the scroll goes on to the end.
    assert [d["id"] for d in got] == ["d25"]
    assert sizes == [0, 0, 1, 0]


def test_scroll_bad_input_is_422_and_unknown_collection_404(server: Server) -> None:
    client, _ = server
    index(client, "scroll-bad", _numbered(2))
    url = "/collections/scroll-bad/documents"

    def error(params: dict[str, Any]) -> tuple[str, str]:
        r = client.get(url, params=params)
        assert r.status_code == 422, r.text
        return r.json()["error"]["code"], r.json()["error"]["message"]

    foreign = base64.urlsafe_b64encode(b"d00").decode()  # base64, but not a cursor of this API
    for cursor in ("not base64!", foreign, "%%%"):
        assert error({"cursor": cursor})[0] == "invalid_cursor"
    code, message = error({"filter": "{not json"})
    assert code == "invalid_filter" and "not valid JSON" in message
    code, message = error({"filter": json.dumps({"must": [{"key": "n", "range": {"gte": "soon"}}]})})
    assert code == "invalid_filter" and message.startswith("filter.must[0].range.gte")
    for limit in (0, 1001, "ten"):
        assert error({"limit": limit})[0] == "invalid_request"
    r = client.get("/collections/no-such/documents")
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"


class Writer(threading.Thread):
    """Upserts (new text, new metadata), adds and deletes documents through the API, one job per round, until
    stopped; `rounds` counts the rounds whose job has succeeded."""

    def __init__(self, base_url: str, name: str) -> None:
        super().__init__(daemon=True)
        self.base_url, self.name_ = base_url, name
        self.rounds = 0
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.base_url, timeout=60) as client:
                k = 0
                while not self.stop.is_set():
                    docs: list[dict[str, Any]] = [
                        {"id": f"d{(7 * k) % 60:03d}", "text": f"rewritten {k}", "metadata": {"n": -k}},
                        {"id": f"d{(7 * k + 3) % 60:03d}", "text": "original", "metadata": {"round": k}},
                        {"id": f"a{k:03d}", "text": f"new before {k}"},
                        {"id": f"d{(5 * k) % 60:03d}x", "text": f"new between {k}"},
                        {"id": f"z{k:03d}", "text": f"new after {k}"},
                    ]
                    index(client, self.name_, docs)
                    if k:
                        run_job(client, client.delete(f"/collections/{self.name_}/documents/z{k - 1:03d}"))
                    with self.cond:
                        self.rounds += 1
                        self.cond.notify_all()
                    k += 1
        except BaseException as exc:  # reported by the test
            self.error = exc
            with self.cond:
                self.cond.notify_all()

    def wait_round(self, seen: int) -> int:
        """Wait until a round after `seen` has been written (so that writes land between two pages)."""
        with self.cond:
            assert self.cond.wait_for(lambda: self.rounds > seen or self.error is not None, timeout=120)
            assert self.error is None, self.error
            return self.rounds


@pytest.mark.parametrize("shards", [1, 3])
def test_a_scroll_visits_every_document_once_while_writers_run(server: Server, shards: int) -> None:
    client, _ = server
    name = f"busy-{shards}"
    initial = [{"id": f"d{i:03d}", "text": "original", "metadata": {"n": i}} for i in range(60)]
    index(client, name, initial, shards=shards)
    writer = Writer(str(client.base_url), name)
    writer.start()
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 4}
    rounds = 0
    try:
        while True:
            page = client.get(f"/collections/{name}/documents", params=params).json()
            seen.extend(d["id"] for d in page["documents"])
            if page["next_cursor"] is None:
                break
            params["cursor"] = page["next_cursor"]
            rounds = writer.wait_round(rounds)
    finally:
        writer.stop.set()
        writer.join(120)
    assert writer.error is None, writer.error
    assert rounds >= 15  # writes really ran between the pages
    assert len(seen) == len(set(seen)), "a document came twice"
    assert seen == sorted(seen)
    assert {d["id"] for d in initial} <= set(seen), "a document present at the start was missed"


def test_ids_with_newlines_address_their_own_document(server: Server) -> None:
    """`/documents/a%0A` once read, patched and deleted document `a`: a route's `$` matched before the newline."""
    client, _ = server
    ids = ["a", "a\n", "\na", "x\ny", "\r\n"]
    index(client, "newlines", [{"id": i, "text": f"text of {i!r}"} for i in ids])
    for i in ids:
        got = client.get(f"/collections/newlines/documents/{quote(i, safe='')}")
        assert got.status_code == 200 and got.json()["id"] == i, (i, got.text)
    path = "/collections/newlines/documents/"
    run_job(client, client.patch(path + quote("a\n", safe=""), json={"metadata": {"k": 1}}))
    run_job(client, client.delete(path + quote("x\ny", safe="")))
    left = {d["id"]: d.get("metadata") for d in scroll_all(client, "newlines")[0]}
    assert set(left) == {"a", "a\n", "\na", "\r\n"}
    assert left["a\n"] == {"k": 1} and not left["a"]  # the patch reached "a\n", not "a"


def test_many_documents_are_read_by_id_in_one_request(server: Server) -> None:
    from service.document_schemas import MAX_GET_IDS

    client, _ = server
    index(client, "mget", [{"id": f"m{i}", "text": f"note {i} about tides", "metadata": {"n": i}} for i in range(5)])
    r = client.post("/collections/mget/documents", json={"ids": ["m3", "nope", "m0", "m3"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [d["id"] for d in body["documents"]] == ["m3", "m0"] and body["not_found"] == ["nope"]
    assert body["documents"][0] == {"id": "m3", "title": "", "text": "note 3 about tides", "metadata": {"n": 3}}
    one = client.get("/collections/mget/documents/m3").json()
    full = client.post("/collections/mget/documents", json={"ids": ["m3"], "passages": True}).json()
    assert full["documents"] == [one]
    assert client.post("/collections/nope/documents", json={"ids": ["a"]}).status_code == 404
    for bad in ({"ids": []}, {"ids": [""]}, {"ids": ["a"] * (MAX_GET_IDS + 1)}, {"ids": "m1"}, {"idz": ["m1"]}):
        r = client.post("/collections/mget/documents", json=bad)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", (bad, r.text)
