"""Per-request bounds that depend on settings (the schemas hold the fixed ones): document metadata at ingest, the
work of one search request, and the size of a response (searches, documents read one at a time or scrolled),
measured before it is built. Each refusal names the limit and what to change."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import cache
from typing import Any

from indexing.docstore import DocumentRecord
from indexing.metadata_bounds import metadata_problem as bounds_problem
from service.document_schemas import DocumentOut, PassageSpan, ScrollResponse, StoredDocumentOut
from service.errors import ApiError
from service.search_schemas import response_metadata
from service.settings import Settings


def metadata_problem(metadata: dict[str, Any] | None, settings: Settings) -> str | None:
    """Why this metadata cannot be stored under the server's limits, or None (indexing/metadata_bounds.py)."""
    return bounds_problem(metadata, settings.metadata_limits())


def check_metadata(documents: list[Any], settings: Settings) -> None:
    """422 for the first document whose metadata is out of bounds (nothing of the request is written)."""
    for i, doc in enumerate(documents):
        problem = metadata_problem(doc.metadata, settings)
        if problem is not None:
            raise ApiError(422, "invalid_request", f"documents.{i}.metadata ({doc.id!r}): {problem}")


def check_search_work(
    settings: Settings, *, queries: list[str], k: int, depth: int, highlight: bool = False, ranked: int | None = None
) -> None:
    """Bounds the work of one request before any is done: hits to return (fewer when each is highlighted: every
    hit's text is gone through again, and its spans add to the body), list depth to fuse, query text. `ranked`:
    documents ranked and hydrated per query when more than the page (a group_by draws its groups from them)."""
    n = len(queries)
    ranked = k if ranked is None else ranked
    if n > settings.max_batch_queries:
        raise ApiError(
            413, "payload_too_large", f"{n} queries in one request; the limit is {settings.max_batch_queries}"
        )
    if ranked * n > settings.max_search_hits:
        what = "(k + offset) x queries" if ranked == k else "group_by.depth x queries"
        raise ApiError(
            413,
            "payload_too_large",
            f"hits to rank, {what}, is {ranked * n}; the limit is {settings.max_search_hits} "
            f"(VELA_MAX_SEARCH_HITS): lower {'k or offset' if ranked == k else 'group_by.depth'}, or split the batch",
        )
    if highlight and k * n > settings.max_highlight_hits:
        raise ApiError(
            413,
            "payload_too_large",
            f"hits to highlight, (k + offset) x queries, is {k * n}; the limit is {settings.max_highlight_hits} "
            "(VELA_MAX_HIGHLIGHT_HITS): lower k or offset, split the batch, or leave highlight off",
        )
    if depth * n > settings.max_search_depth:
        raise ApiError(
            413,
            "payload_too_large",
            f"depth x queries is {depth * n}; the limit is {settings.max_search_depth} (VELA_MAX_SEARCH_DEPTH): "
            "lower depth or split the batch",
        )
    chars = sum(len(q) for q in queries)
    if chars > settings.max_query_chars:
        raise ApiError(
            413,
            "payload_too_large",
            f"the queries have {chars} characters; the limit is {settings.max_query_chars} (VELA_MAX_QUERY_CHARS): "
            "split the batch",
        )


def check_response_size(settings: Settings, size: int, *, advice: str = "lower k or split the batch") -> None:
    """413 when a response of `size` bytes (UTF-8, as sent) would pass VELA_MAX_RESPONSE_BYTES."""
    if size > settings.max_response_bytes:
        raise ApiError(
            413,
            "payload_too_large",
            f"the response would be {size} bytes; the limit is {settings.max_response_bytes} "
            f"(VELA_MAX_RESPONSE_BYTES): {advice}",
        )


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON the way a response body writes it (UTF-8, nothing ASCII-escaped; strings
    escaped alike). Floats are written as Python writes them, never shorter than the body's text (1e-07 for 1e-7):
    for JSON-safe values this is the exact size, or an upper bound by a byte per such float."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return len(text.encode("utf-8", "surrogatepass"))


def float_size(value: float | None) -> int:
    """Bytes of a float field in a response body: null for None and non-finite values (see json_size)."""
    return len(repr(float(value))) if value is not None and math.isfinite(value) else 4


@cache
def _document_skeletons() -> tuple[int, int, int, int]:
    """Bytes of a stored document, a document with its passages (their list's brackets included), a passage span
    and a scroll page without their variable parts: each serialised with the shortest values (empty strings and
    containers, zeros, null), less those values' own bytes."""
    empty = {"id": "", "title": "", "text": "", "metadata": {}}
    stored = len(StoredDocumentOut(**empty).model_dump_json()) - len('""""""{}')
    full = len(DocumentOut(**empty, passages=[]).model_dump_json()) - len('""""""{}')
    span = len(PassageSpan(id=0, index=0, start=0, end=0).model_dump_json()) - len("0000")
    page = len(ScrollResponse(documents=[], next_cursor=None).model_dump_json()) - len("[]null")
    return stored, full, span, page


def document_size(doc: DocumentRecord, *, passages: bool) -> int:
    """Bytes of the document in a response body: as a scroll page holds it (StoredDocumentOut), or with its
    passages as GET one document answers it (DocumentOut). Exact, or above by a byte per float of the metadata
    written with a small exponent (json_size): a response can be refused on it before it is built."""
    stored, full, span, _ = _document_skeletons()
    metadata = json_size(response_metadata(doc.metadata))
    size = json_size(doc.doc_id) + json_size(doc.title) + json_size(doc.text) + metadata
    if not passages:
        return stored + size
    spans = doc.passages or []
    digits = sum(len(str(p)) + len(str(i)) + len(str(a)) + len(str(b)) for p, i, a, b in spans)
    return full + size + len(spans) * span + digits + max(len(spans) - 1, 0)


def get_documents_size(document_sizes: Sequence[int], missing: Sequence[str]) -> int:
    """Bytes of a read-many body, `{"documents":[...],"not_found":[...]}`, from its documents' sizes
    (document_size) and the ids not found: exact, as document_size is."""
    lists = sum(document_sizes) + sum(json_size(m) for m in missing)
    commas = max(len(document_sizes) - 1, 0) + max(len(missing) - 1, 0)
    return len('{"documents":[],"not_found":[]}') + lists + commas


def scroll_page_size(document_sizes: Sequence[int], next_cursor: str | None) -> int:
    """Bytes of a scroll page's body, from its documents' sizes (document_size) and its cursor."""
    _, _, _, page = _document_skeletons()
    cursor = 4 if next_cursor is None else json_size(next_cursor)
    return page + 2 + sum(document_sizes) + max(len(document_sizes) - 1, 0) + cursor
