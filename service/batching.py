"""Micro-batching of query encoding: concurrent requests share one encoder forward pass.

One thread per embedder owns the encoder. A request puts its texts on a queue and waits; the thread takes
the first request, then keeps collecting for at most `max_wait_ms` or until `max_batch` texts, and runs one
forward pass for all of them (as TEI and infinity do). While a pass runs, new requests pile up and go in
the next one, so under load batches grow by themselves and throughput rises with concurrency instead of
queueing one forward pass per request; a lone request waits at most `max_wait_ms`.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from models import Embedder, EmbedderCache
from models.cde.context import CorpusContext

log = logging.getLogger("vela.batching")


class QueryEncoder(Protocol):
    """What the search path needs from an encoder."""

    def encode_queries(self, texts: Sequence[str], *, context: CorpusContext | None = None) -> np.ndarray: ...


@dataclass
class _Request:
    texts: list[str]
    context: CorpusContext | None = None  # requests share a forward pass only when they share a context
    future: Future[np.ndarray] = field(default_factory=Future)


def _context_key(req: _Request) -> str | None:
    return req.context.id if req.context is not None else None


class MicroBatcher:
    """Wraps an Embedder; `encode_queries` is safe to call from any number of threads at once."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        max_batch: int = 32,
        max_wait_ms: float = 1.0,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        if max_batch < 1 or max_wait_ms < 0:
            raise ValueError(f"max_batch must be >= 1 and max_wait_ms >= 0, got {max_batch}, {max_wait_ms}")
        self.embedder = embedder
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self.on_batch = on_batch  # told the size of every pass (a metrics histogram)
        self.batches = 0  # forward passes run, and the texts they held: their ratio is the mean batch size
        self.texts = 0
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        # Taken while collecting a pass for another context: they lead the next passes, in arrival order.
        self._held: collections.deque[_Request] = collections.deque()
        self._thread = threading.Thread(target=self._loop, name=f"encoder-{embedder.name}", daemon=True)
        self._thread.start()

    def encode_queries(self, texts: Sequence[str], *, context: CorpusContext | None = None) -> np.ndarray:
        if not self._thread.is_alive():
            raise RuntimeError("the query encoder has been stopped")
        req = _Request(list(texts), context)
        self._queue.put(req)
        return req.future.result()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(10)

    def _collect(self, first: _Request) -> tuple[list[_Request], bool]:
        """The first request plus whatever arrives within the window for the same context, up to max_batch
        texts. Requests for other contexts (other CDE collections) are held for the passes after this one."""
        batch, size = [first], len(first.texts)
        key = _context_key(first)
        for req in [r for r in self._held if _context_key(r) == key]:
            if size >= self.max_batch:
                break
            self._held.remove(req)
            batch.append(req)
            size += len(req.texts)
        deadline = time.monotonic() + self.max_wait_s
        while size < self.max_batch:
            try:
                # Already queued requests are taken at once; then wait out what is left of the window.
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                return batch, True
            if _context_key(item) != key:
                self._held.append(item)
                continue
            batch.append(item)
            size += len(item.texts)
        return batch, False

    def _loop(self) -> None:
        stopping = False
        while not stopping or self._held:
            first = self._held.popleft() if self._held else self._queue.get()
            if first is None:
                break
            batch, stop_now = self._collect(first)
            stopping = stopping or stop_now
            texts = [t for r in batch for t in r.texts]
            try:
                vectors = self.embedder.encode_queries(texts, context=first.context)  # (n, d)
            except BaseException as exc:  # every waiter must hear of it, or it hangs forever
                log.exception("query encoding failed", extra={"texts": len(texts)})
                for r in batch:
                    r.future.set_exception(exc)
                continue
            self.batches += 1
            self.texts += len(texts)
            if self.on_batch is not None:
                self.on_batch(len(texts))
            row = 0
            for r in batch:
                r.future.set_result(vectors[row : row + len(r.texts)])
                row += len(r.texts)


class QueryEncoders:
    """The query-side encoder of each embedder: micro-batched unless max_batch is 1."""

    def __init__(
        self,
        embedders: EmbedderCache,
        *,
        max_batch: int,
        max_wait_ms: float,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self.embedders = embedders
        self.on_batch = on_batch
        self.max_batch = max_batch
        self.max_wait_ms = max_wait_ms
        self._batchers: dict[str, MicroBatcher] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> QueryEncoder:
        embedder = self.embedders.get(name)
        if self.max_batch <= 1:
            return embedder
        with self._lock:
            if embedder.name not in self._batchers:
                self._batchers[embedder.name] = MicroBatcher(
                    embedder, max_batch=self.max_batch, max_wait_ms=self.max_wait_ms, on_batch=self.on_batch
                )
            return self._batchers[embedder.name]

    def stop(self) -> None:
        with self._lock:
            for b in self._batchers.values():
                b.stop()
            self._batchers.clear()
