"""`VelaClient.index_in_batches`: a corpus of any size, from any iterable, indexed in requests that fit the
server's limits (the bookkeeping is in bulk.py, the cutting into batches in batches.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized
from typing import Literal, overload

from vela_client import calls
from vela_client.bases import SyncBase
from vela_client.batches import Batch, batch_bounds
from vela_client.bulk import QUEUE_FULL, BulkIndex, ProgressReport, batch_call
from vela_client.calls import DocumentLike
from vela_client.errors import NotFound, Unavailable, VelaError
from vela_client.models import Job, JobAccepted, Limits
from vela_client.waiting import check_wait_options


class SyncBulkMixin(SyncBase):
    """Indexing in batches, for `VelaClient`."""

    @overload
    def index_in_batches(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        batch_size: int | None = None,
        batch_bytes: int | None = None,
        wait: Literal[False] = False,
        on_progress: ProgressReport | None = None,
    ) -> list[JobAccepted]: ...

    @overload
    def index_in_batches(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        batch_size: int | None = None,
        batch_bytes: int | None = None,
        wait: Literal[True],
        on_progress: ProgressReport | None = None,
        timeout: float | None = None,
    ) -> list[Job]: ...

    def index_in_batches(
        self,
        collection: str,
        documents: Iterable[DocumentLike],
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        batch_size: int | None = None,
        batch_bytes: int | None = None,
        wait: bool = False,
        on_progress: ProgressReport | None = None,
        timeout: float | None = None,
    ) -> list[JobAccepted] | list[Job]:
        """Upsert documents from any iterable (a generator is read as it goes, never held whole) in several
        `POST /index` requests, one job each, in order: at most `batch_size` documents (default 1000) and
        `batch_bytes` of JSON (default 8 MiB) a request, and never more than the server's limits (`limits()`).
        The collection is created by the first batch, as `index` creates it.

        Returns the accepted jobs, in order. With `wait=True`, waits for them, keeping at most two of its own
        unfinished at a time (so the server is not handed the whole corpus at once), and returns their final
        states, raising JobFailed at the first that did not succeed; `timeout` bounds the whole call. `on_progress`
        gets an `IndexProgress` after each batch accepted and, waiting, each new state of a job.

        A batch refused with 503 `queue_full` (the server's VELA_MAX_QUEUED_JOBS) while jobs of this call are
        unfinished is sent again once the oldest of them has ended (waited for within `timeout`); with none, it is
        retried after Retry-After as any 503 is.

        A document that cannot fit one request raises PayloadTooLarge (code `document_too_large`) naming it;
        every error says, in a note, how many documents (the first ones) had been accepted before it."""
        envelope = calls.index_envelope(collection, embedder=embedder, shards=shards, schema=schema, strict=strict)
        calls.check_documents_argument(documents)
        check_wait_options(wait=wait, timeout=timeout)
        bounds = batch_bounds(batch_size, batch_bytes, self._server_limits())
        total = len(documents) if isinstance(documents, Sized) else None
        run = BulkIndex(envelope, bounds, total=total, timeout=timeout)
        try:
            for doc in documents:
                full = run.add(doc)
                if full is not None:
                    self._send_batch(run, full, wait=wait, on_progress=on_progress)
            last = run.finish()
            if last is not None:
                self._send_batch(run, last, wait=wait, on_progress=on_progress)
            while wait and run.pending:
                self._wait_oldest(run, on_progress)
        except BaseException as exc:  # an interrupt too: the note says how far the call got
            run.annotate(exc)
            raise
        return list(run.finished) if wait else list(run.accepted)

    def _server_limits(self) -> Limits | None:
        """The server's limits; None from a server without `GET /limits` (an older one): the client's defaults
        then apply, and a 413 makes the batches smaller."""
        try:
            return self._send(calls.limits())
        except NotFound:
            return None

    def _send_batch(self, run: BulkIndex, batch: Batch, *, wait: bool, on_progress: ProgressReport | None) -> None:
        queue = [batch]
        while queue:
            batch = queue.pop(0)
            while wait and run.must_wait():
                self._wait_oldest(run, on_progress)
            try:
                accepted = self._send_when_room(run, batch, wait=wait, on_progress=on_progress)
            except VelaError as exc:
                queue = run.refused(batch, exc, queue)  # smaller batches in their place, or the error raised
                continue
            progress = run.accepted_batch(batch, accepted)
            if on_progress is not None:
                on_progress(progress)

    def _send_when_room(
        self, run: BulkIndex, batch: Batch, *, wait: bool, on_progress: ProgressReport | None
    ) -> JobAccepted:
        """Send `batch`. While the server's job queue is full (503 `queue_full`) and this call has jobs of its own
        unfinished, wait for the oldest of them to end (within the call's timeout), then send the batch again; with
        none, the client's retries (after Retry-After) apply as to any call."""
        while run.pending:
            try:
                return self._send(batch_call(batch, queue_full_final=True))
            except Unavailable as exc:
                if exc.code != QUEUE_FULL:
                    raise
                oldest = run.queue_full(exc)
            if wait:
                self._wait_oldest(run, on_progress)
            else:
                self.wait_job(oldest, check=False)
                run.left_queue()
        return self._send(batch_call(batch))

    def _wait_oldest(self, run: BulkIndex, on_progress: ProgressReport | None) -> None:
        report = None if on_progress is None else (lambda job: on_progress(run.seen(job)))
        run.ended(self.wait_job(run.pending[0], on_progress=report, timeout=run.remaining()))
