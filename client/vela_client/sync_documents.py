"""`VelaClient`'s document methods: index, get, scroll and iterate, patch and delete documents, count them, and set
the collection's metadata schema. The write methods start a job; with `wait=True` they wait for it (`_submit`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal, overload

from vela_client import calls, document_calls
from vela_client.bases import SyncBase
from vela_client.calls import DocumentLike
from vela_client.document_calls import INDEX_IN_BATCHES
from vela_client.errors import PayloadTooLarge
from vela_client.models import DocumentPage, Documents, Facet, Job, JobAccepted, StoredDocument
from vela_client.waiting import ProgressCallback


class SyncDocumentsMixin(SyncBase):
    """The documents of a collection, for `VelaClient`."""

    @overload
    def index(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        wait: Literal[False] = False,
    ) -> JobAccepted: ...

    @overload
    def index(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        wait: Literal[True],
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    def index(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        wait: bool = False,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Upsert documents by id (the collection is created on first use, with `embedder`, `shards` and the
        metadata fields `schema` declares, `strict` or not, as `set_schema` takes them; an existing collection must
        have those, Conflict otherwise).

        The documents go in one request, as one job (PayloadTooLarge over the server's limits: `index_in_batches`
        sends any number, from any iterable, in requests that fit). Returns the accepted job at once; with
        `wait=True`, waits for it (see `wait_job`) and returns its final state, raising JobFailed if it did not
        succeed."""
        call = calls.index(collection, documents, embedder=embedder, shards=shards, schema=schema, strict=strict)
        try:
            return self._submit(call, wait, on_progress, timeout)
        except PayloadTooLarge as exc:
            exc.add_note(INDEX_IN_BATCHES)
            raise

    @overload
    def delete_document(self, collection: str, doc_id: str, *, wait: Literal[False] = False) -> JobAccepted: ...

    @overload
    def delete_document(
        self,
        collection: str,
        doc_id: str,
        *,
        wait: Literal[True],
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    def delete_document(
        self,
        collection: str,
        doc_id: str,
        *,
        wait: bool = False,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Delete one document (any id: it is percent-encoded) through a job, like `index`."""
        return self._submit(calls.delete_document(collection, doc_id), wait, on_progress, timeout)

    def get_document(self, collection: str, doc_id: str) -> StoredDocument:
        """A document as stored, with its passages; NotFound (`document_not_found` or `collection_not_found`)."""
        return self._send(document_calls.get_document(collection, doc_id))

    def get_documents(self, collection: str, ids: Iterable[str], *, passages: bool = False) -> Documents:
        """Up to 1,000 documents by id in one request: `documents` (those found, in the order of `ids`, with their
        passages when `passages`) and `not_found` (the other ids). NotFound only for an unknown collection."""
        return self._send(document_calls.get_documents(collection, ids, passages=passages))

    def document_exists(self, collection: str, doc_id: str) -> bool:
        """Whether the collection holds a document of this id: `HEAD /collections/{name}/documents/{id}`, no body
        read. False also when there is no such collection (a HEAD's 404 has no body to say which is missing)."""
        return self._send(document_calls.document_exists(collection, doc_id))

    def scroll_documents(
        self,
        collection: str,
        *,
        filter: Mapping[str, Any] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        order_by: str | None = None,
        direction: Literal["asc", "desc"] | None = None,
    ) -> DocumentPage:
        """One page of the collection's documents in id order, or ordered by a declared field (`order_by`,
        `direction` "asc" or "desc": ties, then documents without a value, in id order), filtered by metadata; pass
        `next_cursor` on with the same order. A page may hold fewer than `limit` documents and still have a
        next_cursor (see `iter_documents`)."""
        call = document_calls.scroll_documents(
            collection, filter=filter, cursor=cursor, limit=limit, order_by=order_by, direction=direction
        )
        return self._send(call)

    def iter_documents(
        self,
        collection: str,
        *,
        filter: Mapping[str, Any] | None = None,
        page_size: int | None = None,
        order_by: str | None = None,
        direction: Literal["asc", "desc"] | None = None,
    ) -> Iterator[StoredDocument]:
        """Every document (that passes `filter`) in id order, or in `order_by`'s, page after page until the scroll
        ends."""
        cursor = None
        while True:
            page = self.scroll_documents(
                collection,
                filter=filter,
                cursor=cursor,
                limit=page_size,
                order_by=order_by,
                direction=direction,
            )
            yield from page.documents
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    @overload
    def patch_document(
        self,
        collection: str,
        doc_id: str,
        metadata: Mapping[str, Any],
        *,
        mode: Literal["merge", "replace"] = "merge",
        unset: Iterable[str] | None = None,
        wait: Literal[False] = False,
    ) -> JobAccepted: ...

    @overload
    def patch_document(
        self,
        collection: str,
        doc_id: str,
        metadata: Mapping[str, Any],
        *,
        mode: Literal["merge", "replace"] = "merge",
        unset: Iterable[str] | None = None,
        wait: Literal[True],
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    def patch_document(
        self,
        collection: str,
        doc_id: str,
        metadata: Mapping[str, Any],
        *,
        mode: Literal["merge", "replace"] = "merge",
        unset: Iterable[str] | None = None,
        wait: bool = False,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """New metadata for a document without re-embedding it, through a job: `merge` updates the given keys (a
        key set to None is stored as null) and removes the `unset` keys, `replace` sets the whole metadata."""
        return self._submit(
            document_calls.patch_document(collection, doc_id, metadata, mode, unset), wait, on_progress, timeout
        )

    @overload
    def delete_documents(
        self,
        collection: str,
        *,
        ids: Iterable[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        wait: Literal[False] = False,
    ) -> JobAccepted: ...

    @overload
    def delete_documents(
        self,
        collection: str,
        *,
        ids: Iterable[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        wait: Literal[True],
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    def delete_documents(
        self,
        collection: str,
        *,
        ids: Iterable[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        wait: bool = False,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Delete many documents through one job, like `index`: by `ids` (an id not stored is skipped), or every
        document whose stored metadata passes `filter` (as `scroll_documents` takes it) when the job runs. Exactly
        one of the two, else ValueError before anything is sent. The job's `result["deleted"]` says how many were
        there."""
        return self._submit(document_calls.delete_documents(collection, ids, filter), wait, on_progress, timeout)

    def count(self, collection: str, filter: Mapping[str, Any] | None = None) -> int:
        """Documents of the searchable (committed) index with a live passage that passes `filter`."""
        return self._send(document_calls.count(collection, filter))

    def facet(
        self, collection: str, key: str, *, filter: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> Facet:
        """The `limit` (default 10) values of a declared keyword, integer or boolean field held by the most
        documents that pass `filter`, each with its number of documents, and how many distinct values there are."""
        return self._send(document_calls.facet(collection, key, filter, limit))

    @overload
    def set_schema(
        self, collection: str, fields: Mapping[str, str], *, strict: bool = False, wait: Literal[False] = False
    ) -> JobAccepted: ...

    @overload
    def set_schema(
        self,
        collection: str,
        fields: Mapping[str, str],
        *,
        strict: bool = False,
        wait: Literal[True],
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    def set_schema(
        self,
        collection: str,
        fields: Mapping[str, str],
        *,
        strict: bool = False,
        wait: bool = False,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Declare the collection's metadata fields ({name: "keyword" | "integer" | "float" | "boolean" |
        "datetime"}) through a job, which fails (JobFailed with `wait=True`) when stored values do not fit."""
        return self._submit(document_calls.set_schema(collection, fields, strict), wait, on_progress, timeout)
