"""Domain functions behind the document API (keyword-only; no HTTP here): read one document, scroll the
documents of a collection, patch a document's metadata, delete many documents, count, and declare metadata
fields later.

Reads go to the doc stores (the latest stored state); count reads the published index. Writes are jobs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from indexing import engine
from indexing.collection import Collection
from indexing.docstore import DocumentRecord
from indexing.docstore_order import Ordering
from indexing.facets import FacetCount, check_facet_field
from indexing.filter_match import each_matches
from indexing.filter_parser import parse_filter
from indexing.filters import Node, Schema
from indexing.jobs import Job, JobKind
from indexing.metadata_paths import path_key
from indexing.patch_job import patched
from service.documents import InvalidMetadata, check_batch_size, check_metadata_types, check_model
from service.limits import document_size, metadata_problem, scroll_page_size
from service.scroll_cursor import ScrollPosition, scroll_cursor
from service.state import AppState

SCAN_FACTOR = 10  # a scroll page scans at most this many documents per document it may return
SCAN_BYTES = 16 * 1024 * 1024  # and at most this much stored metadata
SHARD_PAGE = 256  # documents read from one doc store at a time


class DocumentNotFound(KeyError):
    pass


class MetadataOutOfBounds(ValueError):
    """Metadata past VELA_MAX_METADATA_* (depth, keys, JSON size) or not serialisable."""


def get_document(*, state: AppState, collection: str, doc_id: str) -> DocumentRecord:
    """The stored document with its passages; CollectionNotFound or DocumentNotFound."""
    doc = state.collections.get(collection).document(doc_id)
    if doc is None:
        raise DocumentNotFound(doc_id)
    return doc


def get_documents(*, coll: Collection, ids: list[str], passages: bool) -> tuple[list[DocumentRecord], list[str]]:
    """The stored documents among `ids` in their order (an id once), with their passages when asked, and the ids
    of no document."""
    wanted = list(dict.fromkeys(ids))
    with_passages = {d: doc for d in wanted if (doc := coll.document(d)) is not None} if passages else None
    found = coll.documents(wanted) if with_passages is None else with_passages
    return [found[d] for d in wanted if d in found], [d for d in wanted if d not in found]


@dataclass(frozen=True)
class ScrollPage:
    documents: list[DocumentRecord]
    next_after: ScrollPosition | None  # the last position visited, when documents may follow
    size: int  # bytes of the page's response body (UTF-8), measured before it is built


def _rows(
    coll: Collection, ordering: Ordering | None, after: ScrollPosition | None, page: int
) -> Iterator[tuple[str, str, ScrollPosition]]:
    """(doc_id, metadata JSON, position) of the documents past `after`, in id order or in the ordering."""
    if ordering is None:
        return ((d, m, d) for d, m in coll.scan_metadata(after if isinstance(after, str) else None, page))
    start = after if isinstance(after, tuple) else None
    return ((d, m, (v, d)) for d, m, v in coll.scan_ordered(ordering, start, page))


def scroll(
    *,
    state: AppState,
    coll: Collection,
    node: Node | None,
    after: ScrollPosition | None,
    limit: int,
    ordering: Ordering | None = None,
    seal: Callable[[str], str] = str,
) -> ScrollPage:
    """Documents past `after`, in id order or in `ordering` (a declared field's, indexing/docstore_order.py), whose
    latest stored metadata passes the filter.

    The work of one request is bounded: it scans at most SCAN_FACTOR x limit documents and SCAN_BYTES of
    metadata, and its body (`size`, in UTF-8 bytes as sent) stays within VELA_MAX_RESPONSE_BYTES; a page may so
    hold fewer than `limit` documents and still have a next position. Only a page whose first document alone is
    larger has a size over the limit (its caller refuses it). In id order, documents upserted or patched during a
    scroll keep their place: every document present at its start and not deleted during it is visited exactly
    once. An ordered scroll visits so every document whose value does not change during it (positions are (value,
    id), a total order); one whose value changes may move past the scroll or back before it. `seal` wraps the
    page's cursor (a scoped token's pinned reads seal theirs: service/access.py)."""

    def cursor(position: ScrollPosition) -> str:
        return seal(scroll_cursor(position, ordering))

    def cursor_size(position: ScrollPosition | None) -> int:  # null, or a quoted url-safe base64 string
        return 4 if position is None else len(cursor(position)) + 2

    max_scan = SCAN_FACTOR * limit
    per_shard = max(8, min(SHARD_PAGE, max_scan // len(coll.shard_list) + 1))
    picked: list[tuple[str, ScrollPosition]] = []
    scanned = read = 0
    last, more = after, False
    rows = iter(_rows(coll, ordering, after, per_shard))
    pending = next(rows, None)
    while pending is not None:
        if len(picked) >= limit or scanned >= max_scan or read >= SCAN_BYTES:
            more = True  # one more document exists past this page
            break
        # Matched a chunk at a time (numpy work over the chunk's values): a chunk is never larger than the
        # documents the page still takes, so the page visits the documents it visited one at a time.
        room = min(SHARD_PAGE, limit - len(picked), max_scan - scanned)
        chunk: list[tuple[str, str, ScrollPosition]] = []
        while pending is not None and len(chunk) < room and read < SCAN_BYTES:
            chunk.append(pending)
            scanned, read, last = scanned + 1, read + len(pending[1]), pending[2]
            pending = next(rows, None)
        passing = (
            [True] * len(chunk)
            if node is None
            else each_matches(node, [json.loads(t) for _, t, _ in chunk], [d for d, _, _ in chunk])
        )
        picked.extend((doc_id, at) for (doc_id, _, at), ok in zip(chunk, passing, strict=True) if ok)
    stored = coll.documents([d for d, _ in picked])
    if node is not None:  # deleted or changed since it was scanned: dropped below
        found = [d for d, _ in picked if d in stored]
        still = each_matches(node, [stored[d].metadata for d in found], found)
        stored = {d: stored[d] for d, ok in zip(found, still, strict=True) if ok}
    end_cursor = cursor_size(last if more else None)  # the cursor of a page that takes every picked document
    room = state.settings.max_response_bytes - scroll_page_size([], None) + 4  # for documents, commas and cursor
    out: list[DocumentRecord] = []
    sizes: list[int] = []
    at_last: ScrollPosition | None = None
    for doc_id, at in picked:
        doc = stored.get(doc_id)
        if doc is None:
            continue  # deleted or changed since it was scanned
        size = document_size(doc, passages=False)
        # Ending here, the page's cursor is this document's position, or the end cursor: room for the larger.
        room -= size + (1 if out else 0)
        if at_last is not None and room < max(cursor_size(at), end_cursor):
            return ScrollPage(out, at_last, scroll_page_size(sizes, cursor(at_last)))
        out.append(doc)
        sizes.append(size)
        at_last = at
    next_after = last if more else None
    return ScrollPage(out, next_after, scroll_page_size(sizes, None if next_after is None else cursor(next_after)))


def count(*, state: AppState, coll: Collection, node: Node | None) -> int:
    """Documents of the published index with a live passage that passes the filter."""
    return engine.count(coll, state.collections.fanout, node)


def facet(
    *, state: AppState, coll: Collection, key: str, node: Node | None, limit: int
) -> tuple[list[FacetCount], int]:
    """The most frequent values of a declared field among the documents of the published index that pass the
    filter, and how many distinct values they hold. FacetError when the field cannot be faceted."""
    key = path_key(key)  # `refs[].year`, Qdrant's spelling, is the field `refs.year` (as in a filter)
    kind = check_facet_field(key, Schema.from_json(coll.settings.schema).fields)
    return engine.facet(coll, state.collections.fanout, node, key, kind, limit)


def submit_patch(
    *,
    state: AppState,
    collection: str,
    doc_id: str,
    metadata: dict[str, Any],
    mode: Literal["merge", "replace"],
    unset: Sequence[str] = (),
) -> Job:
    """Check the new metadata (declared fields' types, then the metadata limits on what would be stored), then
    queue a job that writes it without re-embedding. CollectionNotFound, DocumentNotFound, InvalidMetadata,
    MetadataOutOfBounds; nothing is queued on any of them."""
    coll = state.collections.get(collection)
    stored = _metadata_to_patch(state, coll, doc_id)
    problem = metadata_problem(metadata, state.settings)  # first: bounds the depth before anything recurses
    if problem is None:
        try:
            check_metadata_types(schema=coll.settings.schema, documents=[{"metadata": metadata}])
        except InvalidMetadata as exc:
            raise InvalidMetadata(str(exc).removeprefix("documents[0].")) from exc
        merged = metadata if mode == "replace" else patched(stored, metadata, unset)
        problem = metadata_problem(merged, state.settings)
    if problem is not None:
        raise MetadataOutOfBounds(f"metadata ({mode} with the stored metadata): {problem}")
    payload = [{"id": doc_id, "metadata": metadata, "mode": mode, **({"unset": list(unset)} if unset else {})}]
    check_model(state, coll)
    job = state.jobs.create(collection=coll.name, kind=JobKind.PATCH, payload=payload)
    state.queue.submit(job.id)
    return job


def _metadata_to_patch(state: AppState, coll: Any, doc_id: str) -> dict[str, Any]:
    """The metadata a patch of `doc_id` will merge with: the stored document's, else that of an upsert still
    queued or running (writes run in the order sent, so the patch runs after it, as Qdrant's set_payload after an
    upsert does). DocumentNotFound when neither has the document."""
    doc = coll.document(doc_id, passages=False)
    if doc is not None:
        return dict(doc.metadata)
    pending = state.jobs.pending_document(coll.name, doc_id)
    if pending is not None:
        return dict(pending.get("metadata") or {})
    doc = coll.document(doc_id, passages=False)  # the upsert may have ended between the two looks
    if doc is None:
        raise DocumentNotFound(doc_id)
    return dict(doc.metadata)


def submit_schema(*, state: AppState, collection: str, schema: dict[str, Any]) -> Job:
    """Queue a job that declares the collection's metadata fields (it fails, changing nothing, when stored values
    do not fit them). CollectionNotFound before anything is queued."""
    coll = state.collections.get(collection)  # an alias's target, recorded as it is now
    check_model(state, coll)
    job = state.jobs.create(collection=coll.name, kind=JobKind.SCHEMA, payload=[schema])
    state.queue.submit(job.id)
    return job


def submit_delete_many(*, state: AppState, collection: str, ids: list[str] | None, raw_filter: Any) -> Job:
    """Queue the deletion of these ids, or of every document the filter passes when the job runs (the filter
    is checked against the collection's schema here: FilterError). CollectionNotFound, BatchTooLarge."""
    coll = state.collections.get(collection)
    check_model(state, coll)
    if ids is not None:
        unique = list(dict.fromkeys(ids))  # repeats counted once, as the docs say
        check_batch_size(state=state, documents=len(unique))
        job = state.jobs.create(collection=coll.name, kind=JobKind.DELETE, payload=unique)
    else:
        parse_filter(raw_filter, Schema.from_json(coll.settings.schema))
        job = state.jobs.create(collection=coll.name, kind=JobKind.DELETE_BY_FILTER, payload=[raw_filter])
    state.queue.submit(job.id)
    return job
