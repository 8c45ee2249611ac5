"""Micro-batching of query encoding: concurrent requests share one encoder forward pass.

One thread per embedder owns the encoder. A request puts its texts on a queue and waits; the thread takes
the first request, then keeps collecting for at most `max_wait_ms` or until `max_batch` texts, and runs one
forward pass for all of them (as TEI and infinity do). A pass never holds more than `max_batch` texts: a larger
request is encoded over several passes, each shared out round-robin with the other waiting requests.
While a pass runs, new requests pile up and go in the next one, so under load batches grow by themselves and
throughput rises with concurrency instead of queueing one forward pass per request; a lone request waits at most
`max_wait_ms`. With no window (`max_wait_ms` 0, the default) a request that finds the encoder idle and nobody
queued runs its pass in its own thread: no hand-off to the encoder thread and back, and no wait at all.

Each request records its `queue` and `encode` stages (service/timing.py) for the Server-Timing header.

A request carries its budget (indexing/deadline.py: its deadline, and whether its client has gone) to the
encoder thread: one whose budget is spent leaves the queue with DeadlineExceeded before the next pass instead of
being encoded for nobody, so a large batch whose client timed out or hung up stops within one pass, and the
requests behind it are not held back by it.
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

from indexing import deadline
from indexing.deadline import Budget, DeadlineExceeded
from models import Embedder, EmbedderCache
from models.cde.context import CorpusContext
from service import timing

log = logging.getLogger("vela.batching")


class QueryEncoder(Protocol):
    """What the search path needs from an encoder."""

    def encode_queries(self, texts: Sequence[str], *, context: CorpusContext | None = None) -> np.ndarray: ...


@dataclass
class _Request:
    texts: list[str]
    context: CorpusContext | None = None  # requests share a forward pass only when they share a context
    future: Future[np.ndarray] = field(default_factory=Future)
    done: int = 0  # texts encoded so far: a large request is encoded over several passes
    parts: list[np.ndarray] = field(default_factory=list)
    submitted: float = field(default_factory=time.perf_counter)
    began: float | None = None  # when its first pass started, and its last one ended (perf_counter)
    ended: float | None = None
    budget: Budget | None = field(default_factory=deadline.current)  # made in the caller's thread: its request's

    @property
    def left(self) -> int:
        return len(self.texts) - self.done


def _context_key(req: _Request) -> str | None:
    return req.context.id if req.context is not None else None


def share_out(sizes: Sequence[int], capacity: int) -> list[int]:
    """Round-robin one text at a time over the waiting requests until the pass is full: a request of 1000 texts
    and a request of 1 both get a slot in the next pass, so no request waits for another's whole batch."""
    take = [0] * len(sizes)
    room = capacity
    while room > 0:
        moved = False
        for i, size in enumerate(sizes):
            if room > 0 and take[i] < size:
                take[i] += 1
                room -= 1
                moved = True
        if not moved:
            break
    return take


class MicroBatcher:
    """Wraps an Embedder; `encode_queries` is safe to call from any number of threads at once.

    A pass holds at most `max_batch` texts. Requests larger than that are split over several passes, and every
    pass is shared out round-robin among all waiting requests of its context, so that one large batch of queries
    cannot hold single queries back for its whole length."""

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
        # Held for every forward pass, by the encoder thread or by a caller that runs its own pass: one at a time.
        self._busy = threading.Lock()
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        # Requests with texts still to encode, in arrival order (the encoder thread's alone).
        self._waiting: collections.deque[_Request] = collections.deque()
        self._thread = threading.Thread(target=self._loop, name=f"encoder-{embedder.name}", daemon=True)
        self._thread.start()

    def encode_queries(self, texts: Sequence[str], *, context: CorpusContext | None = None) -> np.ndarray:
        if not self._thread.is_alive():
            raise RuntimeError("the query encoder has been stopped")
        if not texts:
            return self.embedder.encode_queries([], context=context)
        if self.max_wait_s == 0 and len(texts) <= self.max_batch:
            direct = self._encode_here(list(texts), context)
            if direct is not None:
                return direct
        req = _Request(list(texts), context)
        self._queue.put(req)
        vectors = req.future.result()
        if req.began is not None and req.ended is not None:
            timing.record("queue", req.began - req.submitted)
            timing.record("encode", req.ended - req.began)
        return vectors

    def _encode_here(self, texts: list[str], context: CorpusContext | None) -> np.ndarray | None:
        """The pass in the caller's thread when the encoder is idle and nobody waits; None: use the queue."""
        if not self._busy.acquire(blocking=False):
            return None
        try:
            if not self._queue.empty() or self._waiting:
                return None
            t0 = time.perf_counter()
            vectors = self.embedder.encode_queries(texts, context=context)  # (n, d)
            timing.record("queue", 0.0)
            timing.record("encode", time.perf_counter() - t0)
            self._count(len(texts))
            return vectors
        finally:
            self._busy.release()

    def _count(self, texts: int) -> None:
        """Called with `_busy` held, so the counters of both kinds of pass add up exactly."""
        self.batches += 1
        self.texts += texts
        if self.on_batch is not None:
            self.on_batch(texts)

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(10)

    def _gather(self) -> bool:
        """Takes what is queued; while the next pass is not full, waits out the window for more. True: stop."""
        while True:  # everything already queued joins the share-out, even when the next pass is full already
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return True
            self._waiting.append(item)
        key = _context_key(self._waiting[0])
        size = sum(r.left for r in self._waiting if _context_key(r) == key)
        deadline = time.monotonic() + self.max_wait_s
        while size < self.max_batch:
            try:
                # Already queued requests are taken at once; then wait out what is left of the window.
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if item is None:
                return True
            self._waiting.append(item)
            if _context_key(item) == key:
                size += item.left
        return False

    def _drop_spent(self) -> None:
        """Requests past their deadline, or whose client went away, leave unencoded: the client has had its 503
        (or nobody is there), and every pass spent on them holds back the requests behind."""
        for r in [r for r in self._waiting if r.budget is not None and r.budget.spent()]:
            self._waiting.remove(r)
            r.future.set_exception(DeadlineExceeded("the request's deadline passed, or its client went away"))

    def _next_pass(self) -> list[tuple[_Request, int]]:
        """(request, texts it puts in) for the next pass: the oldest request's context, shared out fairly."""
        key = _context_key(self._waiting[0])
        same = [r for r in self._waiting if _context_key(r) == key]
        return [(r, n) for r, n in zip(same, share_out([r.left for r in same], self.max_batch), strict=True) if n]

    def _loop(self) -> None:
        stopping = False
        while True:
            if not self._waiting:
                if stopping:
                    break
                first = self._queue.get()
                if first is None:
                    break
                self._waiting.append(first)
            if not stopping:
                stopping = self._gather()
            self._drop_spent()
            if not self._waiting:
                continue
            plan = self._next_pass()
            texts = [t for r, n in plan for t in r.texts[r.done : r.done + n]]
            with self._busy:
                began = time.perf_counter()
                for r, _ in plan:
                    r.began = began if r.began is None else r.began
                try:
                    vectors = self.embedder.encode_queries(texts, context=plan[0][0].context)  # (n, d)
                except BaseException as exc:  # every waiter must hear of it, or it hangs forever
                    log.exception("query encoding failed", extra={"texts": len(texts)})
                    for r, _ in plan:
                        r.future.set_exception(exc)
                        self._waiting.remove(r)
                    continue
                self._count(len(texts))
            ended = time.perf_counter()
            row = 0
            for r, n in plan:
                r.parts.append(vectors[row : row + n])
                r.done += n
                row += n
                if r.left == 0:
                    r.ended = ended
                    self._waiting.remove(r)
                    r.future.set_result(r.parts[0] if len(r.parts) == 1 else np.concatenate(r.parts))
            # The next pass starts from a different request, so no request is always served first.
            self._waiting.rotate(-1)


class Chunked:
    """The query encoder without micro-batching (max_batch 1): a request's texts are still encoded `size` at a
    time, its deadline checked between passes (a batch of 256 long queries is not one uninterruptible pass)."""

    def __init__(self, embedder: Embedder, size: int = 32) -> None:
        self.embedder, self.size = embedder, size

    def encode_queries(self, texts: Sequence[str], *, context: CorpusContext | None = None) -> np.ndarray:
        if len(texts) <= self.size:
            return self.embedder.encode_queries(texts, context=context)
        parts = []
        for i in range(0, len(texts), self.size):
            deadline.check()
            parts.append(self.embedder.encode_queries(texts[i : i + self.size], context=context))  # (size, d)
        return np.concatenate(parts)


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
            return Chunked(embedder)
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
