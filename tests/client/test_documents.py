"""The document API through both clients against a real server: get, scroll (one page and a whole scroll), patch, delete
many (by ids and by filter), count, declaring fields, and search with a filter and an offset; each route's failures
come back as the right exception with the API's code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from vela_client import (
    AsyncVelaClient,
    Conflict,
    DocumentPage,
    InvalidRequest,
    Job,
    JobAccepted,
    JobFailed,
    NotFound,
    StoredDocument,
    VelaClient,
)

from tests.client.conftest import API_KEY

DOCS = [{"id": f"d{i}", "title": f"T{i}", "text": f"note {i} about otters", "metadata": {"n": i}} for i in range(7)]
SMALL = {"must": [{"key": "n", "range": {"lt": 3}}]}


@pytest.fixture
def notes(vela_url: str, unique: Callable[[str], str]) -> str:
    """A fresh collection per test (patches and schemas change it), made with a plain client."""
    name = unique("notes")
    with VelaClient(vela_url, api_key=API_KEY) as vela:
        vela.index(name, DOCS, wait=True)
    return name


def test_get_document_returns_it_as_stored(client: VelaClient, notes: str) -> None:
    doc = client.get_document(notes, "d3")
    assert isinstance(doc, StoredDocument)
    assert (doc.id, doc.title, doc.text, doc.metadata) == ("d3", "T3", "note 3 about otters", {"n": 3})
    assert doc.passages and doc.passages[0].start == 0 and doc.passages[-1].end == len(doc.text)


def test_get_document_errors(client: VelaClient, notes: str) -> None:
    with pytest.raises(NotFound) as missing:
        client.get_document(notes, "nope")
    assert missing.value.code == "document_not_found"
    with pytest.raises(NotFound) as no_collection:
        client.get_document("no-such-collection", "d1")
    assert no_collection.value.code == "collection_not_found"


def test_scroll_documents_pages_with_a_filter(client: VelaClient, notes: str) -> None:
    page = client.scroll_documents(notes, filter=SMALL, limit=2)
    assert isinstance(page, DocumentPage) and [d.id for d in page.documents] == ["d0", "d1"]
    assert page.documents[0].passages is None and page.next_cursor
    rest = client.scroll_documents(notes, filter=SMALL, cursor=page.next_cursor, limit=2)
    assert [d.id for d in rest.documents] == ["d2"] and rest.next_cursor is None
    everything = client.scroll_documents(notes)
    assert [d.id for d in everything.documents] == [d["id"] for d in DOCS]


def test_scroll_documents_errors(client: VelaClient, notes: str) -> None:
    with pytest.raises(InvalidRequest) as cursor:
        client.scroll_documents(notes, cursor="not a cursor")
    assert cursor.value.code == "invalid_cursor"
    with pytest.raises(InvalidRequest) as flt:
        client.scroll_documents(notes, filter={"must": [{"key": "n"}]})
    assert flt.value.code == "invalid_filter"
    with pytest.raises(NotFound):
        client.scroll_documents("no-such-collection")


def test_iter_documents_follows_the_cursor_to_the_end(vela_url: str, notes: str) -> None:
    with VelaClient(vela_url, api_key=API_KEY) as vela:
        assert [d.id for d in vela.iter_documents(notes, page_size=2)] == [d["id"] for d in DOCS]
        assert [d.id for d in vela.iter_documents(notes, filter=SMALL, page_size=1)] == ["d0", "d1", "d2"]


@pytest.mark.anyio
async def test_iter_documents_async(vela_url: str, notes: str) -> None:
    async with AsyncVelaClient(vela_url, api_key=API_KEY) as vela:
        assert [d.id async for d in vela.iter_documents(notes, filter=SMALL, page_size=2)] == ["d0", "d1", "d2"]


def test_scroll_and_iter_documents_order_by_a_declared_field(vela_url: str, notes: str) -> None:
    with VelaClient(vela_url, api_key=API_KEY) as vela:
        with pytest.raises(InvalidRequest) as undeclared:
            vela.scroll_documents(notes, order_by="n")
        assert undeclared.value.code == "invalid_order_by"
        vela.set_schema(notes, {"n": "integer"}, wait=True)
        page = vela.scroll_documents(notes, order_by="n", direction="desc", limit=3)
        assert [d.id for d in page.documents] == ["d6", "d5", "d4"]
        with pytest.raises(InvalidRequest) as other_order:
            vela.scroll_documents(notes, order_by="n", cursor=page.next_cursor)  # made for desc, not asc
        assert other_order.value.code == "invalid_cursor"
        ids = [d.id for d in vela.iter_documents(notes, filter=SMALL, page_size=2, order_by="n", direction="desc")]
        assert ids == ["d2", "d1", "d0"]


@pytest.mark.anyio
async def test_iter_documents_async_order_by(vela_url: str, notes: str) -> None:
    async with AsyncVelaClient(vela_url, api_key=API_KEY) as vela:
        await vela.set_schema(notes, {"n": "integer"}, wait=True)
        got = [d.id async for d in vela.iter_documents(notes, page_size=2, order_by="n", direction="desc")]
        assert got == [d["id"] for d in reversed(DOCS)]


def test_patch_document_then_search_filters_and_count_see_it(client: VelaClient, notes: str) -> None:
    accepted = client.patch_document(notes, "d5", {"n": 1, "tag": None})
    assert isinstance(accepted, JobAccepted)
    assert client.wait_job(accepted).kind == "patch"
    assert client.get_document(notes, "d5").metadata == {"n": 1, "tag": None}
    assert client.count(notes, SMALL) == 4 and client.count(notes) == len(DOCS)
    hits = client.search(notes, "otters", mode="bm25", k=10, filter=SMALL).hits
    assert sorted(h.id for h in hits) == ["d0", "d1", "d2", "d5"]
    second = client.search(notes, "otters", mode="bm25", k=2, offset=2, filter=SMALL).hits
    assert [h.id for h in second] == [h.id for h in hits[2:4]]
    job = client.patch_document(notes, "d5", {"only": True}, mode="replace", wait=True)
    assert isinstance(job, Job) and job.succeeded
    assert client.get_document(notes, "d5").metadata == {"only": True}
    client.patch_document(notes, "d5", {"kept": 1}, unset=["only"], wait=True)  # Qdrant's delete_payload
    assert client.get_document(notes, "d5").metadata == {"kept": 1}
    with pytest.raises(TypeError, match="list of keys"):
        client.patch_document(notes, "d5", {}, unset="kept")


def test_patch_document_errors(client: VelaClient, notes: str) -> None:
    with pytest.raises(NotFound) as missing:
        client.patch_document(notes, "nope", {"n": 1})
    assert missing.value.code == "document_not_found"
    with pytest.raises(InvalidRequest) as mode:
        client.patch_document(notes, "d1", {"n": 1}, mode="upsert")  # type: ignore[call-overload]
    assert mode.value.code == "invalid_request"


def _left(vela_url: str, client: VelaClient, name: str) -> list[str]:
    """The collection's document ids by a whole scroll; searches and counts must agree."""
    with VelaClient(vela_url, api_key=API_KEY) as vela:
        scrolled = [d.id for d in vela.iter_documents(name, page_size=2)]
    hits = client.search(name, "otters", mode="bm25", k=100).hits
    assert sorted(h.id for h in hits) == scrolled and client.count(name) == len(scrolled)
    return scrolled


def test_delete_documents_by_ids_then_by_filter(client: VelaClient, vela_url: str, notes: str) -> None:
    job = client.delete_documents(notes, ids=(i for i in ["d0", "d1", "d1", "no-such"]), wait=True)
    assert isinstance(job, Job) and job.succeeded
    assert (job.kind, job.result) == ("delete", {"deleted": 2})  # a repeated id once, an unknown one skipped
    assert _left(vela_url, client, notes) == ["d2", "d3", "d4", "d5", "d6"]
    big = {"must": [{"key": "n", "range": {"gte": 5}}]}
    job = client.delete_documents(notes, filter=big, wait=True)
    assert (job.kind, job.result) == ("delete_by_filter", {"deleted": 2})
    assert _left(vela_url, client, notes) == ["d2", "d3", "d4"]
    accepted = client.delete_documents(notes, filter=big)  # again, without waiting: nothing left to match
    assert isinstance(accepted, JobAccepted)
    assert client.wait_job(accepted).result == {"deleted": 0}
    assert _left(vela_url, client, notes) == ["d2", "d3", "d4"]


@pytest.mark.anyio
async def test_delete_documents_async_then_iter_documents(vela_url: str, notes: str) -> None:
    seen: list[Job] = []

    async def report(job: Job) -> None:
        seen.append(job)

    async with AsyncVelaClient(vela_url, api_key=API_KEY) as vela:
        job = await vela.delete_documents(notes, ids=["d6"], wait=True, on_progress=report)
        assert (job.kind, job.result) == ("delete", {"deleted": 1}) and seen[-1] == job
        job = await vela.delete_documents(notes, filter=SMALL, wait=True, timeout=60)
        assert (job.kind, job.result) == ("delete_by_filter", {"deleted": 3})
        assert [d.id async for d in vela.iter_documents(notes, page_size=2)] == ["d3", "d4", "d5"]
        hits = (await vela.search(notes, "otters", mode="bm25", k=100)).hits
        assert sorted(h.id for h in hits) == ["d3", "d4", "d5"]


def test_delete_documents_errors(client: VelaClient, vela_url: str, notes: str) -> None:
    with pytest.raises(NotFound) as missing:
        client.delete_documents("no-such-collection", ids=["d1"])
    assert missing.value.code == "collection_not_found"
    # What the client cannot tell is refused by the server, and changes nothing either.
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"ids": []}, "invalid_request"),
        ({"filter": {}}, "invalid_request"),  # no "delete everything": delete the collection for that
        ({"filter": {"must": [{"key": "n"}]}}, "invalid_filter"),
    ]
    for kwargs, code in refusals:
        with pytest.raises(InvalidRequest) as refused:
            client.delete_documents(notes, **kwargs)
        assert refused.value.code == code, kwargs
    with pytest.raises(TypeError, match="not one string"):
        client.delete_documents(notes, ids="d1")  # would be the ids "d" and "1"
    assert _left(vela_url, client, notes) == [d["id"] for d in DOCS]


def test_count_errors(client: VelaClient, notes: str) -> None:
    with pytest.raises(InvalidRequest) as flt:
        client.count(notes, {"must": [{"key": "n", "range": {"gte": "later"}}]})
    assert flt.value.code == "invalid_filter"
    with pytest.raises(NotFound):
        client.count("no-such-collection")


def test_set_schema_then_a_strict_schema_refuses_undeclared_fields(client: VelaClient, notes: str) -> None:
    accepted = client.set_schema(notes, {"n": "integer"}, strict=True)
    assert isinstance(accepted, JobAccepted) and client.wait_job(accepted).kind == "schema"
    schema = client.get_collection(notes).model_dump(by_alias=True)["schema"]
    assert schema == {"fields": {"n": "integer"}, "strict": True}
    assert client.count(notes, SMALL) == 3
    with pytest.raises(InvalidRequest) as strict:
        client.count(notes, {"must": [{"key": "color", "match": {"value": "red"}}]})
    assert strict.value.code == "invalid_filter"


def test_set_schema_errors(client: VelaClient, notes: str) -> None:
    with pytest.raises(JobFailed) as misfit:
        client.set_schema(notes, {"n": "keyword"}, wait=True)  # the stored values are integers
    assert "7 document(s)" in str(misfit.value)
    with pytest.raises(InvalidRequest):
        client.set_schema(notes, {"n": "number"})
    with pytest.raises(NotFound):
        client.set_schema("no-such-collection", {})


def test_index_declares_the_schema_of_a_new_collection(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("typed")
    assert client.index(name, DOCS, schema={"n": "integer"}, strict=True, wait=True).succeeded
    schema = client.get_collection(name).model_dump(by_alias=True)["schema"]
    assert schema == {"fields": {"n": "integer"}, "strict": True}
    assert client.count(name, SMALL) == 3
    with pytest.raises(InvalidRequest) as strict:  # strict: a filter may name declared fields only
        client.count(name, {"must": [{"key": "color", "match": {"value": "red"}}]})
    assert strict.value.code == "invalid_filter"
    with pytest.raises(InvalidRequest) as misfit:  # every later write is checked against the declared types
        client.index(name, [{"id": "x", "text": "otters", "metadata": {"n": "seven"}}])
    assert misfit.value.code == "invalid_metadata"
    with pytest.raises(Conflict) as other:  # an existing collection must have the schema named
        client.index(name, [{"id": "x", "text": "otters"}], schema={"n": "integer"})
    assert "another schema" in other.value.message
    job = client.index(
        name, [{"id": "x", "text": "otters", "metadata": {"n": 8}}], schema={"n": "integer"}, strict=True
    )
    assert client.wait_job(job).succeeded and client.get_collection(name).documents == len(DOCS) + 1


@pytest.mark.parametrize("doc_id", [".", "..", "...", "./..", "%2E%2E"])
def test_ids_made_of_dots_name_that_document_and_nothing_else(client: VelaClient, notes: str, doc_id: str) -> None:
    # "." and ".." must go out as one encoded segment: resolved as dot segments, deleting the document ".."
    # would have sent DELETE /collections/{name} and deleted the whole collection.
    client.index(notes, [{"id": doc_id, "text": "a document named with dots"}], wait=True)
    assert client.get_document(notes, doc_id).id == doc_id
    client.patch_document(notes, doc_id, metadata={"n": 99}, wait=True)
    assert client.get_document(notes, doc_id).metadata == {"n": 99}
    client.delete_document(notes, doc_id, wait=True)
    with pytest.raises(NotFound):
        client.get_document(notes, doc_id)
    assert client.get_collection(notes).documents == len(DOCS)  # the collection and its other documents stay
    with pytest.raises(NotFound):
        client.delete_snapshot(notes, doc_id)
    assert client.get_collection(notes).documents == len(DOCS)
