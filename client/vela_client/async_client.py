"""`AsyncVelaClient`: the client for asyncio and trio (through anyio); the methods of `VelaClient`, awaited."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterable, Mapping
from types import TracebackType
from typing import Any, Literal, TypeVar, Unpack, overload

import anyio
import httpx

from vela_client import calls
from vela_client.calls import DocumentLike, SearchOptions
from vela_client.config import DEFAULT_TIMEOUT_S
from vela_client.config import http_options as _options
from vela_client.errors import error_from_transport
from vela_client.models import (
    Alias,
    BatchSearchResponse,
    Collection,
    DocumentPage,
    Health,
    Job,
    JobAccepted,
    Model,
    Readiness,
    SearchResponse,
    StoredDocument,
)
from vela_client.retry import RetryPolicy, retry_delay
from vela_client.routes import Call
from vela_client.waiting import AsyncProgressCallback, JobRef, JobWatch, check_wait_options, finished, job_id_of

T = TypeVar("T")


class AsyncVelaClient:
    """A Vela API client over one `httpx.AsyncClient` (a connection pool: share one client, and close it).

    `base_url` and `api_key` default to VELA_URL and VELA_API_KEY. `retry` governs 503 answers and connection
    errors (see `RetryPolicy`); `http_options` go to `httpx.AsyncClient` as they are (proxy, verify, transport, limits).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        http_options: Mapping[str, Any] | None = None,
    ) -> None:
        options = _options(base_url=base_url, api_key=api_key, timeout=timeout, headers=headers, extra=http_options)
        self._http = httpx.AsyncClient(**options)
        self.retry = retry or RetryPolicy()

    @property
    def base_url(self) -> str:
        return str(self._http.base_url)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncVelaClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, call: Call[T]) -> T:
        attempt = 1
        while True:
            try:
                response = await self._http.request(call.route.method, call.path, json=call.json, params=call.params)
            except httpx.TransportError as exc:
                delay = retry_delay(self.retry, call.route, attempt, error=exc)
                if delay is None:
                    raise error_from_transport(exc, call.route.method, call.path) from exc
            else:
                delay = retry_delay(self.retry, call.route, attempt, response=response)
                if delay is None:
                    return call.parse(response)
            await anyio.sleep(delay)
            attempt += 1

    # Health

    async def health(self) -> Health:
        """Liveness: the process answers."""
        return await self._send(calls.healthz())

    async def ready(self) -> Readiness:
        """Readiness; raises Unavailable (code `not_ready`) at once, without retrying, while the server starts."""
        return await self._send(calls.readyz())

    async def metrics(self) -> str:
        """The Prometheus text exposition."""
        return await self._send(calls.metrics())

    # Collections and documents

    async def list_collections(self) -> list[Collection]:
        return await self._send(calls.list_collections())

    async def get_collection(self, name: str) -> Collection:
        """Counts, embedder, dims and index sizes; NotFound (`collection_not_found`) when there is none."""
        return await self._send(calls.get_collection(name))

    async def delete_collection(self, name: str) -> None:
        """Delete a collection, its documents and indexes (its pending jobs are cancelled)."""
        return await self._send(calls.delete_collection(name))

    @overload
    async def index(
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
    async def index(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def index(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Upsert documents by id (the collection is created on first use, with `embedder`, `shards` and the
        metadata fields `schema` declares, `strict` or not, as `set_schema` takes them; an existing collection must
        have those, Conflict otherwise).

        Returns the accepted job at once; with `wait=True`, waits for it (see `wait_job`) and returns its final
        state, raising JobFailed if it did not succeed."""
        call = calls.index(collection, documents, embedder=embedder, shards=shards, schema=schema, strict=strict)
        return await self._submit(call, wait, on_progress, timeout)

    @overload
    async def delete_document(self, collection: str, doc_id: str, *, wait: Literal[False] = False) -> JobAccepted: ...

    @overload
    async def delete_document(
        self,
        collection: str,
        doc_id: str,
        *,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def delete_document(
        self,
        collection: str,
        doc_id: str,
        *,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Delete one document (any id: it is percent-encoded) through a job, like `index`."""
        return await self._submit(calls.delete_document(collection, doc_id), wait, on_progress, timeout)

    async def get_document(self, collection: str, doc_id: str) -> StoredDocument:
        """A document as stored, with its passages; NotFound (`document_not_found` or `collection_not_found`)."""
        return await self._send(calls.get_document(collection, doc_id))

    async def scroll_documents(
        self,
        collection: str,
        *,
        filter: Mapping[str, Any] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> DocumentPage:
        """One page of the collection's documents in id order, filtered by metadata; pass `next_cursor` on.
        A page may hold fewer than `limit` documents and still have a next_cursor (see `iter_documents`)."""
        return await self._send(calls.scroll_documents(collection, filter=filter, cursor=cursor, limit=limit))

    async def iter_documents(
        self, collection: str, *, filter: Mapping[str, Any] | None = None, page_size: int | None = None
    ) -> AsyncIterator[StoredDocument]:
        """Every document (that passes `filter`) in id order, page after page until the scroll ends."""
        cursor = None
        while True:
            page = await self.scroll_documents(collection, filter=filter, cursor=cursor, limit=page_size)
            for doc in page.documents:
                yield doc
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    @overload
    async def patch_document(
        self,
        collection: str,
        doc_id: str,
        metadata: Mapping[str, Any],
        *,
        mode: Literal["merge", "replace"] = "merge",
        wait: Literal[False] = False,
    ) -> JobAccepted: ...

    @overload
    async def patch_document(
        self,
        collection: str,
        doc_id: str,
        metadata: Mapping[str, Any],
        *,
        mode: Literal["merge", "replace"] = "merge",
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def patch_document(
        self,
        collection: str,
        doc_id: str,
        metadata: Mapping[str, Any],
        *,
        mode: Literal["merge", "replace"] = "merge",
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """New metadata for a document without re-embedding it, through a job: `merge` updates the given keys (a
        key set to None is stored as null), `replace` sets the whole metadata."""
        return await self._submit(calls.patch_document(collection, doc_id, metadata, mode), wait, on_progress, timeout)

    @overload
    async def delete_documents(
        self,
        collection: str,
        *,
        ids: Iterable[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        wait: Literal[False] = False,
    ) -> JobAccepted: ...

    @overload
    async def delete_documents(
        self,
        collection: str,
        *,
        ids: Iterable[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def delete_documents(
        self,
        collection: str,
        *,
        ids: Iterable[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Delete many documents through one job, like `index`: by `ids` (an id not stored is skipped), or every
        document whose stored metadata passes `filter` (as `scroll_documents` takes it) when the job runs. Exactly
        one of the two, else ValueError before anything is sent. The job's `result["deleted"]` says how many were
        there."""
        return await self._submit(calls.delete_documents(collection, ids, filter), wait, on_progress, timeout)

    async def count(self, collection: str, filter: Mapping[str, Any] | None = None) -> int:
        """Documents of the searchable (committed) index with a live passage that passes `filter`."""
        return await self._send(calls.count(collection, filter))

    @overload
    async def set_schema(
        self, collection: str, fields: Mapping[str, str], *, strict: bool = False, wait: Literal[False] = False
    ) -> JobAccepted: ...

    @overload
    async def set_schema(
        self,
        collection: str,
        fields: Mapping[str, str],
        *,
        strict: bool = False,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def set_schema(
        self,
        collection: str,
        fields: Mapping[str, str],
        *,
        strict: bool = False,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Declare the collection's metadata fields ({name: "keyword" | "integer" | "float" | "boolean" |
        "datetime"}) through a job, which fails (JobFailed with `wait=True`) when stored values do not fit."""
        return await self._submit(calls.set_schema(collection, fields, strict), wait, on_progress, timeout)

    # Generations: another embedder for a collection, without downtime

    @overload
    async def reindex(
        self,
        collection: str,
        embedder: str,
        *,
        chunking: Mapping[str, int] | None = None,
        promote: Literal["auto", "manual"] = "auto",
        gate: Mapping[str, Any] | None = None,
        reencode: bool = False,
        wait: Literal[False] = False,
    ) -> JobAccepted: ...

    @overload
    async def reindex(
        self,
        collection: str,
        embedder: str,
        *,
        chunking: Mapping[str, int] | None = None,
        promote: Literal["auto", "manual"] = "auto",
        gate: Mapping[str, Any] | None = None,
        reencode: bool = False,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def reindex(
        self,
        collection: str,
        embedder: str,
        *,
        chunking: Mapping[str, int] | None = None,
        promote: Literal["auto", "manual"] = "auto",
        gate: Mapping[str, Any] | None = None,
        reencode: bool = False,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Build a new generation of the collection with another embedder (a registry name) while it serves;
        promoted when built (and gated: {"dataset" | "queries" + "qrels", "mode", "tolerance"}), or waiting for
        `promote` with promote="manual". A model that encodes documents as the current one does (a `vela adapt`
        model) gets the stored vectors copied; reencode=True encodes every document regardless. The job's `result`
        has the gate's NDCG@10 figures and how many documents were embedded or copied."""
        call = calls.reindex(collection, embedder, chunking, promote, gate, reencode)
        return await self._submit(call, wait, on_progress, timeout)

    @overload
    async def promote(self, collection: str, *, wait: Literal[False] = False) -> JobAccepted: ...

    @overload
    async def promote(
        self,
        collection: str,
        *,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def promote(
        self,
        collection: str,
        *,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Switch searches to the generation a manual reindex finished; Conflict when none waits."""
        return await self._submit(calls.promote(collection), wait, on_progress, timeout)

    @overload
    async def rollback(self, collection: str, *, wait: Literal[False] = False) -> JobAccepted: ...

    @overload
    async def rollback(
        self,
        collection: str,
        *,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def rollback(
        self,
        collection: str,
        *,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Switch searches back to the previous generation (kept until the next reindex); Conflict when none."""
        return await self._submit(calls.rollback(collection), wait, on_progress, timeout)

    # Models and aliases

    async def list_models(self) -> list[Model]:
        """The models requests may name (the built-in `default` first), with their kind, dims and recorded evals."""
        return await self._send(calls.list_models())

    async def list_aliases(self) -> list[Alias]:
        return await self._send(calls.list_aliases())

    async def get_alias(self, alias: str) -> Alias:
        """The collection an alias points at; NotFound (`alias_not_found`) when there is none."""
        return await self._send(calls.get_alias(alias))

    async def set_alias(self, alias: str, collection: str) -> Alias:
        """Point an alias at a collection: created, or switched atomically (searches through it see the old
        collection or the new one). Conflict when a collection has the alias's name."""
        return await self._send(calls.set_alias(alias, collection))

    async def delete_alias(self, alias: str) -> None:
        """Remove an alias; its collection stays."""
        return await self._send(calls.delete_alias(alias))

    # Search

    async def search(self, collection: str, query: str, **options: Unpack[SearchOptions]) -> SearchResponse:
        """Dense, BM25 or hybrid search; options left out take the server's defaults."""
        return await self._send(calls.search(query, calls.search_options(collection, options)))

    async def search_batch(
        self, collection: str, queries: Iterable[str], **options: Unpack[SearchOptions]
    ) -> BatchSearchResponse:
        """Many queries with the same options in one request; `results[i]` answers `queries[i]`."""
        return await self._send(calls.search_batch(queries, calls.search_options(collection, options)))

    # Jobs

    async def get_job(self, job: JobRef) -> Job:
        return await self._send(calls.get_job(job_id_of(job)))

    async def cancel_job(self, job: JobRef) -> Job:
        """Cancel a queued or running job; Conflict if it has already ended."""
        return await self._send(calls.cancel_job(job_id_of(job)))

    async def retry_job(self, job: JobRef) -> Job:
        """Queue a failed job again; Conflict if it did not fail."""
        return await self._send(calls.retry_job(job_id_of(job)))

    async def wait_job(
        self,
        job: JobRef,
        *,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
        poll_interval: float = 0.5,
        check: bool = True,
    ) -> Job:
        """Poll a job until it ends and return its final state.

        `on_progress(job)` (a function or a coroutine function) is called with every new state seen (status or
        counts changed), the last included.
        `timeout` (seconds; None waits as long as it takes) raises JobWaitTimeout; the job itself goes on.
        With `check`, a job that ends failed or cancelled raises JobFailed."""
        job_id = job_id_of(job)
        watch = JobWatch(timeout=timeout, poll_interval=poll_interval)
        while True:
            state = await self.get_job(job_id)
            if on_progress is not None and watch.changed(state):
                reported = on_progress(state)
                if inspect.isawaitable(reported):  # a coroutine function
                    await reported
            if state.finished:
                return finished(state, check=check)
            await anyio.sleep(watch.next_delay(state))

    async def _submit(
        self, call: Call[JobAccepted], wait: bool, on_progress: AsyncProgressCallback | None, timeout: float | None
    ) -> JobAccepted | Job:
        """Send a write (after checking the waiting options, so that a bad one sends nothing), then maybe wait."""
        check_wait_options(wait=wait, on_progress=on_progress, timeout=timeout)
        accepted = await self._send(call)
        if not wait:
            return accepted
        return await self.wait_job(accepted, on_progress=on_progress, timeout=timeout)
