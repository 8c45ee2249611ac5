"""Where an engine call's time goes: dense retrieval, BM25 and fusion, for the caller that asks.

The engine does not know about HTTP requests; a caller that wants the split (the service's `Server-Timing`
header) opens `collect()` around its engine call, and the engine's stages add their seconds to it. The clock
lives in a context variable, so concurrent searches on other threads keep their own. Shards searched on Ray
actors run in other processes: their stages are not seen here, and only the caller's total remains.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_CLOCK: ContextVar[dict[str, float] | None] = ContextVar("vela_engine_clock", default=None)


@contextmanager
def collect() -> Iterator[dict[str, float]]:
    """Seconds per engine stage recorded inside the block (a stage run several times adds up)."""
    clock: dict[str, float] = {}
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    clock = _CLOCK.get()
    if clock is None:  # nobody asked: no timing work at all
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        clock[name] = clock.get(name, 0.0) + time.perf_counter() - t0
