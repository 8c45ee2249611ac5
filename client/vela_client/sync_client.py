"""`VelaClient`: the blocking client. `AsyncVelaClient` (async_client.py) has the same methods, awaited.

This module holds the transport (`_send`, with retries), health, search and jobs (`wait_job`, and `_submit`, which
the write methods go through); the document methods are in sync_documents.py, those for collections,
generations, models and aliases in sync_collections.py, and snapshots (backup and restore) in sync_snapshots.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx

from vela_client import calls, search_calls
from vela_client.config import DEFAULT_TIMEOUT_S
from vela_client.config import http_options as _options
from vela_client.errors import ClientClosed, error_from_transport
from vela_client.models import (
    BatchSearchResponse,
    Health,
    Job,
    JobAccepted,
    JobPage,
    Limits,
    Readiness,
    SearchResponse,
)
from vela_client.retry import RetryPolicy, retry_delay
from vela_client.routes import Call
from vela_client.search_calls import SearchOptions
from vela_client.sync_bulk import SyncBulkMixin
from vela_client.sync_collections import SyncCollectionsMixin
from vela_client.sync_documents import SyncDocumentsMixin
from vela_client.sync_snapshots import SyncSnapshotsMixin
from vela_client.transfers import file_chunks
from vela_client.waiting import JobRef, JobWatch, ProgressCallback, check_wait_options, finished, job_id_of

T = TypeVar("T")


class VelaClient(SyncDocumentsMixin, SyncBulkMixin, SyncCollectionsMixin, SyncSnapshotsMixin):
    """A Vela API client over one `httpx.Client` (a connection pool: share one client, and close it).

    `base_url` and `api_key` default to VELA_URL and VELA_API_KEY. `retry` governs 503 answers and connection
    errors (see `RetryPolicy`); `http_options` go to `httpx.Client` as they are (proxy, verify, transport, limits).
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
        self._http = httpx.Client(**options)
        self.retry = retry or RetryPolicy()

    @property
    def base_url(self) -> str:
        return str(self._http.base_url)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> VelaClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _request(self, call: Call[T]) -> httpx.Response:
        """One try of `call`: its answer read whole, or for a download, its body written to the target as it comes
        (a try after a broken one starts the file over)."""
        body: Any = call.content
        if call.upload is not None:
            body = file_chunks(call.upload)
        request = self._http.build_request(
            call.route.method, call.path, params=call.params, content=body, headers=call.headers
        )
        response = self._http.send(request, stream=call.download is not None)
        download = call.download
        if download is None:
            return response
        try:
            if not response.is_success:
                response.read()  # an error's body, for its code and message
                return response
            download.begin()
            for chunk in response.iter_bytes():
                download.write(chunk)
        finally:  # however the body ends, the connection goes back to the pool or away
            response.close()
        return response

    def _send(self, call: Call[T]) -> T:
        if self._http.is_closed:  # httpx would raise a bare RuntimeError
            raise ClientClosed()
        attempt = 1
        while True:
            try:
                response = self._request(call)
            except httpx.TransportError as exc:
                delay = retry_delay(self.retry, call.route, attempt, error=exc)
                if delay is None:
                    raise error_from_transport(exc, call.route.method, call.path) from exc
            else:
                delay = retry_delay(self.retry, call.route, attempt, response=response, final_codes=call.final_codes)
                if delay is None:
                    return call.parse(response)
            time.sleep(delay)
            attempt += 1

    # Health

    def health(self) -> Health:
        """Liveness: the process answers."""
        return self._send(calls.healthz())

    def ready(self) -> Readiness:
        """Readiness, asked once (never retried). A process that is stopping answers 503: Unavailable (code
        `not_ready`). A server still starting does not answer at all: its port refuses the connection
        (ConnectionFailed) or, with several processes, the supervisor holds it until one is up (the client's
        timeout applies: Timeout)."""
        return self._send(calls.readyz())

    def metrics(self) -> str:
        """The Prometheus text exposition."""
        return self._send(calls.metrics())

    def limits(self) -> Limits:
        """The per-request bounds the server enforces (largest JSON body, documents a request, ...): what
        `index_in_batches` sizes its requests by. NotFound from a server older than this route."""
        return self._send(calls.limits())

    # Search

    def search(self, collection: str, query: str, **options: Unpack[SearchOptions]) -> SearchResponse:
        """Dense, BM25 or hybrid search; options left out take the server's defaults."""
        return self._send(search_calls.search(query, search_calls.search_options(collection, options)))

    def search_batch(
        self, collection: str, queries: Iterable[str], **options: Unpack[SearchOptions]
    ) -> BatchSearchResponse:
        """Many queries with the same options in one request; `results[i]` answers `queries[i]`."""
        return self._send(search_calls.search_batch(queries, search_calls.search_options(collection, options)))

    def recommend(
        self,
        collection: str,
        like: Iterable[str],
        *,
        unlike: Iterable[str] | None = None,
        k: int | None = None,
        offset: int | None = None,
        filter: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
        with_text: bool | None = None,
        with_metadata: bool | Sequence[str] | None = None,
        group_by: Mapping[str, Any] | None = None,
    ) -> SearchResponse:
        """Documents like the stored documents `like` (and unlike `unlike`), by their stored vectors; the named
        documents are never among the hits. NotFound (document_not_found) names any the collection lacks.
        `with_text` / `with_metadata`: what each hit carries, `group_by` at most `size` hits per value of a metadata
        field, as in a search."""
        return self._send(
            search_calls.recommend(
                collection, like, unlike, k, offset, filter, score_threshold, with_text, with_metadata, group_by
            )
        )

    # Jobs

    def get_job(self, job: JobRef) -> Job:
        return self._send(calls.get_job(job_id_of(job)))

    def list_jobs(
        self,
        *,
        collection: str | None = None,
        status: str | Iterable[str] | None = None,
        kind: str | Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        """Jobs newest first (at most `limit`, the server's default 50), only those of `collection` (an alias
        means its collection), of `status` and of `kind` where given (one name or several); pass `next_cursor`
        on as `cursor` for the next page."""
        return self._send(calls.list_jobs(collection, status, kind, limit, cursor))

    def cancel_job(self, job: JobRef) -> Job:
        """Cancel a queued or running job; Conflict if it has already ended."""
        return self._send(calls.cancel_job(job_id_of(job)))

    def retry_job(self, job: JobRef) -> Job:
        """Queue a failed job again; Conflict if it did not fail."""
        return self._send(calls.retry_job(job_id_of(job)))

    def wait_job(
        self,
        job: JobRef,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
        poll_interval: float = 0.5,
        check: bool = True,
    ) -> Job:
        """Poll a job until it ends and return its final state.

        `on_progress(job)` is called with every new state seen (status or counts changed), the last included.
        `timeout` (seconds; None waits as long as it takes) raises JobWaitTimeout; the job itself goes on.
        With `check`, a job that ends failed or cancelled raises JobFailed."""
        job_id = job_id_of(job)
        watch = JobWatch(timeout=timeout, poll_interval=poll_interval)
        while True:
            state = self.get_job(job_id)
            if on_progress is not None and watch.changed(state):
                on_progress(state)
            if state.finished:
                return finished(state, check=check)
            time.sleep(watch.next_delay(state))

    def _submit(
        self, call: Call[JobAccepted], wait: bool, on_progress: ProgressCallback | None, timeout: float | None
    ) -> JobAccepted | Job:
        """Send a write (after checking the waiting options, so that a bad one sends nothing), then maybe wait."""
        check_wait_options(wait=wait, on_progress=on_progress, timeout=timeout)
        accepted = self._send(call)
        if not wait:
            return accepted
        return self.wait_job(accepted, on_progress=on_progress, timeout=timeout)
