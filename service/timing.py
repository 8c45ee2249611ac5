"""Where a request's time goes: named stages, sent back as a `Server-Timing` header.

The request guard (service/middleware.py) starts one `Timings` per HTTP request in a context variable; the
search path records its stages into it from whatever thread runs them (the thread pool and the encoder's
callers run with a copy of the request's context, which holds the same object). Stages of a search:

    wait       from the server reading the request's headers to the first middleware running: the event loop busy
               with other requests (a request's task waits its turn)
    thread     handing the search to the thread pool: waiting for a free worker thread, then for the GIL
    queue      waiting for the query encoder (micro-batching: another pass running, or the batch window)
    encode     the encoder's forward pass that held this request's queries
    engine     the engine call: dense, BM25 and fusion over every shard (indexing.engine.search), split into
    dense      ... nearest-neighbour retrieval (FAISS) with the exact rescoring of its candidates
    bm25       ... the corpus-wide term counts and BM25 scoring
    fuse       ... merging the shards' runs and fusing the runs (engine minus these three: the fan-out itself)
    hydrate    reading the hits' passages and documents from the doc store
    rerank     the cross-encoder, when the request asks for it
    serialize  building and serialising the response, and the hand-off back to the event loop
    other      what no stage above names: reading and parsing the body, validation, the handler's own steps
    total      the whole request inside the server, from its headers read to the response start

The stages other than `total` and the parts of `engine` add up to `total` (`other` is its remainder), so a slow
request shows where its time went, also under load, where most of it is waiting (`wait`, `thread`, `queue`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

HEADER = b"server-timing"
SCOPE_KEY = "vela.timings"  # the request's Timings in its ASGI scope (middleware outside the request guard)
# The order stages are written in (any other stage follows, in the order it was recorded).
ORDER = (
    "wait", "thread", "queue", "vectors", "encode", "engine", "dense", "bm25", "fuse",
    "hydrate", "rerank", "highlight", "serialize", "other", "total",
)  # fmt: skip
HANDED = "handed"  # the mark a handler makes as it hands work to the thread pool: the `thread` stage starts there
PARTS = frozenset({"dense", "bm25", "fuse"})  # parts of `engine`: `other` does not count them again


class Timings:
    """Milliseconds per stage of one request; a stage recorded twice (several passes) adds up."""

    __slots__ = ("marks", "stages", "started")

    def __init__(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started  # perf_counter() of the arrival
        self.stages: dict[str, float] = {}
        self.marks: dict[str, float] = {}  # perf_counter() instants, e.g. when the search work ended

    def add(self, stage: str, seconds: float) -> None:
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds * 1000.0

    def header_value(self) -> bytes:
        """`queue;dur=0.01, encode;dur=3.52, ...` (RFC-style Server-Timing metrics, durations in ms)."""
        names = [s for s in ORDER if s in self.stages] + [s for s in self.stages if s not in ORDER]
        return ", ".join(f"{s};dur={self.stages[s]:.3f}" for s in names).encode()


_CURRENT: ContextVar[Timings | None] = ContextVar("vela_timings", default=None)


def begin(arrived: float | None = None) -> tuple[Timings, Token[Timings | None]]:
    """A fresh Timings for this request's context; `end(token)` when the request is over. `arrived`: when the
    server read the request's headers (perf_counter()); the time since then is the `wait` stage."""
    timings = Timings(arrived)
    if arrived is not None:
        timings.add("wait", max(time.perf_counter() - arrived, 0.0))
    return timings, _CURRENT.set(timings)


def end(token: Token[Timings | None]) -> None:
    _CURRENT.reset(token)


def current() -> Timings | None:
    """This request's Timings (None outside an HTTP request: `vela eval`, benches, tests calling functions)."""
    return _CURRENT.get()


def record(stage: str, seconds: float) -> None:
    timings = _CURRENT.get()
    if timings is not None:
        timings.add(stage, seconds)


def mark(name: str) -> None:
    """Note the instant `name` happened (e.g. `searched`: the start of the `serialize` stage)."""
    timings = _CURRENT.get()
    if timings is not None:
        timings.marks[name] = time.perf_counter()


def since(name: str, stage: str) -> None:
    """Record `stage` as the time from the mark `name` to now (nothing when the mark was not made)."""
    timings = _CURRENT.get()
    if timings is not None and name in timings.marks:
        timings.add(stage, time.perf_counter() - timings.marks[name])


@contextmanager
def stage(name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        record(name, time.perf_counter() - t0)


def finish(timings: Timings) -> bytes:
    """The header value at the response start: `serialize` from the `searched` mark, `other` and `total`."""
    now = time.perf_counter()
    searched = timings.marks.get("searched")
    if searched is not None and "serialize" not in timings.stages:
        timings.add("serialize", now - searched)
    total = (now - timings.started) * 1000.0
    named = sum(ms for s, ms in timings.stages.items() if s not in PARTS and s not in ("other", "total"))
    timings.stages["other"] = max(total - named, 0.0)
    timings.stages["total"] = total
    return timings.header_value()
