"""`AsyncVelaClient.index_in_batches`: `VelaClient`'s (sync_bulk.py), awaited, from an iterable or an async one."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sized
from typing import Literal, overload

from vela_client import calls
from vela_client.bases import AsyncBase
from vela_client.batches import Batch, batch_bounds
from vela_client.bulk import QUEUE_FULL, AsyncProgressReport, BulkIndex, IndexProgress, batch_call
from vela_client.calls import DocumentLike
from vela_client.errors import NotFound, Unavailable, VelaError
from vela_client.models import Job, JobAccepted, Limits
from vela_client.waiting import check_wait_options

Documents = Iterable[DocumentLike] | AsyncIterable[DocumentLike]


async def _each(documents: Documents) -> AsyncIterator[DocumentLike]:
    if isinstance(documents, AsyncIterable):
        async for doc in documents:
            yield doc
    else:
        for doc in documents:
            yield doc


async def _report(on_progress: AsyncProgressReport | None, progress: IndexProgress) -> None:
    if on_progress is not None:
        reported = on_progress(progress)
        if inspect.isawaitable(reported):  # a coroutine function
            await reported


class AsyncBulkMixin(AsyncBase):
    """Indexing in batches, for `AsyncVelaClient`."""

    @overload
    async def index_in_batches(
        self,
        collection: str,
        documents: Documents,
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        batch_size: int | None = None,
        batch_bytes: int | None = None,
        wait: Literal[False] = False,
        on_progress: AsyncProgressReport | None = None,
    ) -> list[JobAccepted]: ...

    @overload
    async def index_in_batches(
        self,
        collection: str,
        documents: Documents,
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        batch_size: int | None = None,
        batch_bytes: int | None = None,
        wait: Literal[True],
        on_progress: AsyncProgressReport | None = None,
        timeout: float | None = None,
    ) -> list[Job]: ...

    async def index_in_batches(
        self,
        collection: str,
        documents: Documents,
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
        batch_size: int | None = None,
        batch_bytes: int | None = None,
        wait: bool = False,
        on_progress: AsyncProgressReport | None = None,
        timeout: float | None = None,
    ) -> list[JobAccepted] | list[Job]:
        """`VelaClient.index_in_batches`, awaited: `documents` may also be an async iterable (an async generator
        reading a database), and `on_progress` a coroutine function."""
        envelope = calls.index_envelope(collection, embedder=embedder, shards=shards, schema=schema, strict=strict)
        calls.check_documents_argument(documents)
        check_wait_options(wait=wait, timeout=timeout)
        bounds = batch_bounds(batch_size, batch_bytes, await self._server_limits())
        total = len(documents) if isinstance(documents, Sized) else None
        run = BulkIndex(envelope, bounds, total=total, timeout=timeout)
        try:
            async for doc in _each(documents):
                full = run.add(doc)
                if full is not None:
                    await self._send_batch(run, full, wait=wait, on_progress=on_progress)
            last = run.finish()
            if last is not None:
                await self._send_batch(run, last, wait=wait, on_progress=on_progress)
            while wait and run.pending:
                await self._wait_oldest(run, on_progress)
        except BaseException as exc:  # a cancellation too: the note says how far the call got
            run.annotate(exc)
            raise
        return list(run.finished) if wait else list(run.accepted)

    async def _server_limits(self) -> Limits | None:
        """The server's limits; None from a server without `GET /limits` (see `VelaClient`'s)."""
        try:
            return await self._send(calls.limits())
        except NotFound:
            return None

    async def _send_batch(
        self, run: BulkIndex, batch: Batch, *, wait: bool, on_progress: AsyncProgressReport | None
    ) -> None:
        queue = [batch]
        while queue:
            batch = queue.pop(0)
            while wait and run.must_wait():
                await self._wait_oldest(run, on_progress)
            try:
                accepted = await self._send_when_room(run, batch, wait=wait, on_progress=on_progress)
            except VelaError as exc:
                queue = run.refused(batch, exc, queue)  # smaller batches in their place, or the error raised
                continue
            await _report(on_progress, run.accepted_batch(batch, accepted))

    async def _send_when_room(
        self, run: BulkIndex, batch: Batch, *, wait: bool, on_progress: AsyncProgressReport | None
    ) -> JobAccepted:
        """Send `batch`, waiting for this call's oldest unfinished job while the server's queue is full (see
        `VelaClient`'s)."""
        while run.pending:
            try:
                return await self._send(batch_call(batch, queue_full_final=True))
            except Unavailable as exc:
                if exc.code != QUEUE_FULL:
                    raise
                oldest = run.queue_full(exc)
            if wait:
                await self._wait_oldest(run, on_progress)
            else:
                await self.wait_job(oldest, check=False)
                run.left_queue()
        return await self._send(batch_call(batch))

    async def _wait_oldest(self, run: BulkIndex, on_progress: AsyncProgressReport | None) -> None:
        report = None if on_progress is None else (lambda job: on_progress(run.seen(job)))
        run.ended(await self.wait_job(run.pending[0], on_progress=report, timeout=run.remaining()))
