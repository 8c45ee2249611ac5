"""The response size limit (VELA_MAX_RESPONSE_BYTES) of GET one document and of the scroll: sizes are measured in
UTF-8 bytes as sent, exactly, before a body is built; a scroll page fills up to the limit and stops before a
document that would pass it; a document too large on its own is refused (413) in the documented error shape."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import service.api.routes.documents as document_routes
from indexing.docstore import DocumentRecord
from indexing.docstore_order import Ordering
from service.document_schemas import (
    DocumentOut,
    GetDocumentsResponse,
    PassageSpan,
    ScrollResponse,
    StoredDocumentOut,
)
from service.limits import document_size, get_documents_size, scroll_page_size
from service.scroll_cursor import encode_cursor, scroll_cursor
from tests.service.conftest import running_app
from tests.service.document_helpers import index, scroll_all

LIMIT = 4096
# 1,800 characters, 4,500 bytes of UTF-8: a body counted in characters passes LIMIT, counted in bytes it does not.
WIDE = "é潮" * 900
SMALL = "é" * 500  # 1,000 bytes: three such documents fit in a page


def _records() -> list[DocumentRecord]:
    """Documents with what a body escapes or cleans: non-ASCII of every width, quotes, control characters, line
    separators, non-finite numbers, nesting past the response's depth, a value that is not JSON."""
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(200):
        node["d"] = {}
        node = node["d"]
    spans = [(17, 0, 0, 9), (123456789, 1, 5, 1_000_000)]
    return [
        DocumentRecord(
            'id "é" 日本', "Tides\t🌊", 'say "hi"\n\x01\x7f\u2028 é 日本 🎉', {"t": "é", "f": 0.1}, "h", spans
        ),
        DocumentRecord("nan", "", "", {"nan": float("nan"), "inf": [float("-inf")], "n": 10**30}, "h", []),
        DocumentRecord("deep", "t", "x", deep, "h", None),
        DocumentRecord("odd", "t", "x", {"when": Path("/x"), "pair": (1, 2)}, "h", [(1, 0, 0, 1)]),
    ]


@pytest.mark.parametrize("doc", _records(), ids=lambda d: d.doc_id)
def test_a_documents_measured_size_is_its_body_in_bytes(doc: DocumentRecord) -> None:
    spans = [PassageSpan(id=p, index=i, start=a, end=b) for p, i, a, b in doc.passages or []]
    full = DocumentOut(id=doc.doc_id, title=doc.title, text=doc.text, metadata=doc.metadata, passages=spans)
    assert document_size(doc, passages=True) == len(full.__pydantic_serializer__.to_json(full))
    stored = StoredDocumentOut(id=doc.doc_id, title=doc.title, text=doc.text, metadata=doc.metadata)
    assert document_size(doc, passages=False) == len(stored.model_dump_json().encode())


ORDERED = scroll_cursor(('\x01 é 日本 "' * 40, 'd/é "日本"'), Ordering("tags.name", "keyword", descending=True))


@pytest.mark.parametrize("cursor", [None, encode_cursor("d/é 日本"), ORDERED])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_scroll_pages_measured_size_is_its_body_in_bytes(cursor: str | None, n: int) -> None:
    docs = _records()[:n]
    page = ScrollResponse(
        documents=[StoredDocumentOut(id=d.doc_id, title=d.title, text=d.text, metadata=d.metadata) for d in docs],
        next_cursor=cursor,
    )
    sizes = [document_size(d, passages=False) for d in docs]
    assert scroll_page_size(sizes, cursor) == len(page.__pydantic_serializer__.to_json(page))


@pytest.mark.parametrize("missing", [[], ["gone"], ['a "quoted" é 日本', "x"]])
@pytest.mark.parametrize("passages", [False, True])
@pytest.mark.parametrize("n", [0, 1, 4])
def test_a_read_many_bodys_measured_size_is_its_body_in_bytes(n: int, passages: bool, missing: list[str]) -> None:
    docs = _records()[:n]
    out = GetDocumentsResponse(
        documents=[
            DocumentOut(
                id=d.doc_id,
                title=d.title,
                text=d.text,
                metadata=d.metadata,
                passages=[PassageSpan(id=p, index=i, start=a, end=b) for p, i, a, b in d.passages or []],
            )
            if passages
            else StoredDocumentOut(id=d.doc_id, title=d.title, text=d.text, metadata=d.metadata)
            for d in docs
        ],
        not_found=missing,
    )
    sizes = [document_size(d, passages=passages) for d in docs]
    assert get_documents_size(sizes, missing) == len(out.__pydantic_serializer__.to_json(out))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    data = tmp_path_factory.mktemp("vela-doc-size")
    with running_app(data, embedder=str(tiny_embedder_dir), max_response_bytes=LIMIT) as (client, _app):
        index(client, "wide", [{"id": "wide-é", "text": WIDE, "metadata": {"k": "v"}}])
        docs = [{"id": f"s{i:02d}", "text": SMALL, "metadata": {"n": i}} for i in range(10)]
        index(client, "small", docs)
        index(client, "mixed", [*docs[:4], {"id": "s99", "text": WIDE}])
        yield client


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the routes built: documents' response models (DocumentOut, `_stored`) and bodies (`_bounded`)."""
    calls: list[str] = []

    def spy(name: str) -> None:
        real: Callable[..., Any] = getattr(document_routes, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(document_routes, name, wrapper)

    for name in ("DocumentOut", "_stored", "_bounded"):
        spy(name)
    return calls


def _refused(r: httpx.Response, doc_id: str) -> int:
    """The size a 413 names, after checking the documented error shape and that it names the document."""
    assert r.status_code == 413, r.text
    assert set(r.json()) == {"error"}
    error = r.json()["error"]
    assert error["code"] == "payload_too_large"
    head, _, tail = error["message"].partition(" bytes; ")
    assert head.startswith("the response would be ")
    assert tail.startswith(f"the limit is {LIMIT} (VELA_MAX_RESPONSE_BYTES): ")
    assert repr(doc_id) in tail and "raise the limit" in tail
    return int(head.removeprefix("the response would be "))


def test_get_of_a_document_over_the_limit_in_bytes_is_413_before_it_is_built(
    server: httpx.Client, built: list[str]
) -> None:
    r = server.get("/collections/wide/documents/wide-%C3%A9")
    size = _refused(r, "wide-é")
    assert size > LIMIT > len(WIDE) + 500  # a count of characters would have sent it
    assert built == []


def test_get_of_a_document_within_the_limit_is_sent_whole(server: httpx.Client, built: list[str]) -> None:
    r = server.get("/collections/small/documents/s03")
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["id"], got["text"], got["metadata"]) == ("s03", SMALL, {"n": 3}) and got["passages"]
    assert len(r.content) <= LIMIT
    assert built == ["DocumentOut", "_bounded"]


def test_a_scroll_of_a_document_over_the_limit_in_bytes_is_413_before_it_is_built(
    server: httpx.Client, built: list[str]
) -> None:
    r = server.get("/collections/wide/documents")
    size = _refused(r, "wide-é")
    assert size > LIMIT
    assert built == []


def test_scroll_pages_fill_up_to_the_limit_in_bytes(server: httpx.Client) -> None:
    docs, sizes = scroll_all(server, "small", limit=100)
    assert [d["id"] for d in docs] == [f"s{i:02d}" for i in range(10)]
    assert all(d["text"] == SMALL for d in docs)
    assert max(sizes) >= 3  # as many as fit: not one a page
    params: dict[str, Any] = {"limit": 100}
    while True:  # every page's body, as sent, within the limit
        r = server.get("/collections/small/documents", params=params)
        assert r.status_code == 200 and len(r.content) <= LIMIT
        params["cursor"] = r.json()["next_cursor"]
        if params["cursor"] is None:
            break


def test_ordered_scroll_pages_with_long_keys_stay_within_the_limit_in_bytes(server: httpx.Client) -> None:
    # Keys of 256 characters (one a JSON escape) make the cursors long: they count in the body.
    docs = [{"id": f"k{i:02d}", "text": SMALL, "metadata": {"k": "\x01" + "k" * 300 + str(9 - i)}} for i in range(10)]
    index(server, "ordered", docs, schema={"fields": {"k": "keyword"}})
    got, sizes = scroll_all(server, "ordered", limit=100, order_by="k", direction="desc")
    assert [d["id"] for d in got] == [f"k{i:02d}" for i in range(10)]  # the keys tie: ids decide
    assert max(sizes) >= 2
    params: dict[str, Any] = {"limit": 100, "order_by": "k", "direction": "desc"}
    while True:
        r = server.get("/collections/ordered/documents", params=params)
        assert r.status_code == 200 and len(r.content) <= LIMIT
        params["cursor"] = r.json()["next_cursor"]
        if params["cursor"] is None:
            break


def test_a_scroll_stops_before_a_document_over_the_limit_which_alone_is_refused(server: httpx.Client) -> None:
    first = server.get("/collections/mixed/documents", params={"limit": 100})
    assert first.status_code == 200 and len(first.content) <= LIMIT
    page = first.json()
    seen = [d["id"] for d in page["documents"]]
    while page["next_cursor"] is not None:
        r = server.get("/collections/mixed/documents", params={"limit": 100, "cursor": page["next_cursor"]})
        if r.status_code == 413:
            _refused(r, "s99")
            break
        page = r.json()
        seen += [d["id"] for d in page["documents"]]
    else:
        pytest.fail("the scroll sent the document over the limit")
    assert seen == ["s00", "s01", "s02", "s03"]


def test_many_documents_read_by_id_past_the_limit_are_413_and_within_it_are_sent(server: httpx.Client) -> None:
    ids = [f"s{i:02d}" for i in range(3)]
    r = server.post("/collections/small/documents", json={"ids": ids})
    assert r.status_code == 200 and len(r.content) <= LIMIT, r.text
    assert [d["text"] for d in r.json()["documents"]] == [SMALL] * 3
    r = server.post("/collections/small/documents", json={"ids": [f"s{i:02d}" for i in range(6)]})
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text
    assert "ask for fewer documents" in r.json()["error"]["message"]
