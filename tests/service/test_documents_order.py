"""Ordered scrolls through a real server (GET /collections/{name}/documents?order_by=&direction=): pages equal a sort
of every document by (value, id), with the documents without a value last, on 1 and 3 shards, in both directions,
under a filter, with ties, lists, nested fields and datetimes; cursors are bound to their ordering; undeclared fields
are refused; a field declared later is ordered by at once."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.service.document_helpers import index, run_job, scroll_all, tiny_server

Server = tuple[httpx.Client, FastAPI]
FIELDS = {"year": "integer", "score": "float", "tenant": "keyword", "published": "datetime", "author.born": "integer"}
ACME = {"must": [{"key": "tenant", "match": {"value": "acme"}}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[Server]:
    with tiny_server(tmp_path_factory.mktemp("vela-order"), tiny_embedder_dir) as pair:
        yield pair


def _docs(n: int = 41) -> list[dict[str, Any]]:
    docs = []
    for i in range(n):
        md: dict[str, Any] = {
            "year": [i % 6, (i * 5) % 9] if i % 5 == 0 else (None if i % 11 == 0 else 2000 + i % 6),
            "score": (i * 7 % 10) / 4,
            "tenant": ["acme", "globex", "initech"][i % 3],
            # offsets differ, so the text order is not the time order
            "published": f"2024-03-{1 + i % 9:02d}T{i % 24:02d}:30:00+0{i % 4}:00",
            "author": [{"born": 1950 + i % 4}, {"born": 1990 - i % 7}] if i % 4 else {"name": "anon"},
        }
        if i % 7 == 3:
            del md["year"]  # missing, as null is
        docs.append({"id": f"d{(i * 17) % n:02d}", "text": f"document {i}", "metadata": md})
    return docs


def _values(metadata: dict[str, Any], field: str) -> list[Any]:
    value: Any = metadata
    for part in field.split("."):
        if isinstance(value, list):
            value = [x[part] for x in value if isinstance(x, dict) and part in x]
        else:
            value = value.get(part) if isinstance(value, dict) else None
    items = value if isinstance(value, list) else [value]
    if FIELDS[field] == "datetime":
        return [datetime.fromisoformat(x) for x in items if x is not None]
    return [x for x in items if x is not None]


def oracle(docs: list[dict[str, Any]], field: str, descending: bool, flt: dict[str, Any] | None = None) -> list[str]:
    """Ids by the field's smallest value ascending (largest descending), ties by id; those without a value last."""
    keep = [d for d in docs if flt is None or d["metadata"]["tenant"] == "acme"]
    having = [d for d in keep if _values(d["metadata"], field)]
    having.sort(key=lambda d: d["id"])
    pick = max if descending else min
    having.sort(key=lambda d: pick(_values(d["metadata"], field)), reverse=descending)  # stable: ids stay in order
    return [d["id"] for d in having] + sorted(d["id"] for d in keep if not _values(d["metadata"], field))


@pytest.fixture(scope="module")
def collections(server: Server) -> list[str]:
    client, _ = server
    for shards in (1, 3):
        index(client, f"order-{shards}", _docs(), shards=shards, schema={"fields": FIELDS})
    return ["order-1", "order-3"]


@pytest.mark.parametrize("field", list(FIELDS))
@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_pages_equal_a_sort_of_every_document(
    server: Server, collections: list[str], field: str, direction: str
) -> None:
    client, _ = server
    for name in collections:
        for flt, limit in ((None, 6), (ACME, 4)):
            got, sizes = scroll_all(client, name, limit=limit, filter=flt, order_by=field, direction=direction)
            ids = [d["id"] for d in got]
            assert ids == oracle(_docs(), field, direction == "desc", flt), (name, flt)
            assert len(ids) == len(set(ids)) and max(sizes) <= limit
    # asc is the default direction; Qdrant's spelling of a path through a list names the same field
    plain, _ = scroll_all(client, "order-3", limit=50, order_by=field.replace(".", "[]."))
    assert [d["id"] for d in plain] == oracle(_docs(), field, False)


def test_one_page_holds_the_whole_order_with_documents_as_stored(server: Server, collections: list[str]) -> None:
    client, _ = server
    page = client.get("/collections/order-3/documents", params={"order_by": "score", "limit": 1000}).json()
    by_id = {d["id"]: d for d in _docs()}
    assert page["next_cursor"] is None
    assert [d["id"] for d in page["documents"]] == oracle(_docs(), "score", False)
    assert all(d["metadata"] == by_id[d["id"]]["metadata"] for d in page["documents"])


def _cursor(client: httpx.Client, name: str, **params: Any) -> str:
    page = client.get(f"/collections/{name}/documents", params={"limit": 2, **params}).json()
    return str(page["next_cursor"])


def test_cursors_are_bound_to_their_ordering_and_bad_orders_are_refused(server: Server, collections: list[str]) -> None:
    client, _ = server
    url = "/collections/order-1/documents"

    def error(params: dict[str, Any]) -> tuple[str, str]:
        r = client.get(url, params=params)
        assert r.status_code == 422, r.text
        return r.json()["error"]["code"], r.json()["error"]["message"]

    year_asc = _cursor(client, "order-1", order_by="year")
    for params in (
        {"order_by": "year", "direction": "desc"},
        {"order_by": "score"},
        {},  # id order
    ):
        code, message = error({**params, "cursor": year_asc})
        assert code == "invalid_cursor" and "order_by='year' direction=asc" in message, message
    code, message = error({"order_by": "year", "cursor": _cursor(client, "order-1")})
    assert code == "invalid_cursor" and "id order" in message
    # A cursor spelled by hand is a position; one whose value is not of the field's type is refused.
    edited = "o1\n" + json.dumps(["year", "asc", "integer", "2003", "d00"])
    code, _ = error({"order_by": "year", "cursor": base64.urlsafe_b64encode(edited.encode()).decode()})
    assert code == "invalid_cursor"
    deep = base64.urlsafe_b64encode(("o1\n" + "[" * 2000).encode()).decode()  # was a 500: RecursionError
    assert error({"order_by": "year", "cursor": deep})[0] == "invalid_cursor"
    for spelled in ('["year","asc","integer",2003,"\\ud800"]', '["year","asc","integer",null,"\\udfff"]'):
        lone = base64.urlsafe_b64encode(("o1\n" + spelled).encode()).decode()  # was a 500: UnicodeEncodeError
        assert error({"order_by": "year", "cursor": lone})[0] == "invalid_cursor"
    spelled = "o1\n" + json.dumps(["year", "asc", "integer", 2003, "d00"])
    cursor = base64.urlsafe_b64encode(spelled.encode()).decode()
    got = client.get(url, params={"order_by": "year", "cursor": cursor, "limit": 1000}).json()["documents"]
    smallest = {d["id"]: min(_values(d["metadata"], "year"), default=None) for d in _docs()}
    past = [i for i in oracle(_docs(), "year", False) if smallest[i] is None or (smallest[i], i) > (2003, "d00")]
    assert [d["id"] for d in got] == past and 0 < len(past) < len(smallest)
    code, message = error({"order_by": "colour"})
    assert code == "invalid_order_by" and "not declared" in message
    code, message = error({"direction": "desc"})
    assert code == "invalid_request" and message.startswith("direction")
    assert error({"order_by": "year", "direction": "up"})[0] == "invalid_request"


def test_a_field_declared_later_is_ordered_by_and_one_dropped_is_refused(server: Server) -> None:
    client, _ = server
    for shards in (1, 3):
        name = f"order-later-{shards}"
        index(client, name, _docs(23), shards=shards)
        assert client.get(f"/collections/{name}/documents", params={"order_by": "year"}).status_code == 422
        run_job(client, client.put(f"/collections/{name}/schema", json={"fields": {"year": "integer"}}))
        got, _ = scroll_all(client, name, limit=5, order_by="year", direction="desc")
        assert [d["id"] for d in got] == oracle(_docs(23), "year", True)
        # Written after the declaration: the keys follow upserts and patches.
        index(client, name, [{"id": "new", "text": "late", "metadata": {"year": 3000}}])
        run_job(client, client.patch(f"/collections/{name}/documents/new", json={"metadata": {"year": -1}}))
        got, _ = scroll_all(client, name, limit=5, order_by="year")
        assert got[0]["id"] == "new"
        run_job(client, client.put(f"/collections/{name}/schema", json={"fields": {}}))
        r = client.get(f"/collections/{name}/documents", params={"order_by": "year"})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_order_by"


def test_a_page_scans_at_most_ten_documents_per_document_it_may_return(server: Server, collections: list[str]) -> None:
    client, _ = server
    one = {
        "must": [{"key": "score", "range": {"gte": 0.25, "lte": 0.25}}, {"key": "tenant", "match": {"value": "globex"}}]
    }
    got, sizes = scroll_all(client, "order-3", limit=1, filter=one, order_by="published", direction="desc")
    # limit 1: each page scans 10 documents; empty pages carry a cursor, and the scroll goes on to the end.
    assert len(got) == 1 and max(sizes) == 1 and len(sizes) >= 41 // 10


@pytest.mark.parametrize("shards", [1, 3])
def test_an_ordered_scroll_visits_every_unchanged_document_once_while_others_are_written(
    server: Server, shards: int
) -> None:
    client, _ = server
    name = f"order-busy-{shards}"
    initial = _docs()
    index(client, name, initial, shards=shards, schema={"fields": FIELDS})
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 4, "order_by": "year", "direction": "desc"}
    for k in range(1000):
        page = client.get(f"/collections/{name}/documents", params=params).json()
        seen.extend(d["id"] for d in page["documents"])
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
        # Between pages: new documents anywhere in the order, one of them moved, an earlier one deleted.
        news = [{"id": f"n{k:03d}-{j}", "text": "new", "metadata": {"year": 1998 + (k * 3 + j) % 12}} for j in range(2)]
        index(client, name, news)
        run_job(client, client.patch(f"/collections/{name}/documents/n{k:03d}-0", json={"metadata": {"year": 2001}}))
        if k:
            run_job(client, client.delete(f"/collections/{name}/documents/n{k - 1:03d}-1"))
    assert len(seen) == len(set(seen)), "a document came twice"
    want = oracle(initial, "year", True)
    assert [i for i in seen if not i.startswith("n")] == want, "an unchanged document was missed or out of order"


def test_a_field_the_doc_store_does_not_order_by_yet_is_409_not_a_wrong_order(server: Server) -> None:
    """What a process sees for a moment while a schema job in another one changes the field (or before the start-up
    check of a store written by an earlier version): its settings declare the field, the store keeps no keys."""
    client, app = server
    index(client, "order-lag", _docs(5), schema={"fields": {"year": "integer"}})
    coll = app.state.vela.collections.get("order-lag")
    coll.docstore.sync_order_fields({})
    r = client.get("/collections/order-lag/documents", params={"order_by": "year"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict", r.text
    coll.sync_order_keys()
    got, _ = scroll_all(client, "order-lag", order_by="year")
    assert [d["id"] for d in got] == oracle(_docs(5), "year", False)
