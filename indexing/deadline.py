"""The deadline of the request an engine call works for: long scans check it and stop once it has passed.

The engine does not know about HTTP requests; the service's request guard opens `until()` around each request
with its deadline (VELA_REQUEST_TIMEOUT_S), and the deadline lives in a context variable, so the thread that runs
the request's engine call (the thread pool runs it with a copy of the request's context) sees it, and concurrent
requests keep their own. Past the deadline the client has had its 503 already: `check()` raises DeadlineExceeded
so that the work stops there instead of running on for nobody. Calls outside a request (jobs, delete by filter,
the CLI) have no deadline and never stop. Checked between shards (indexing/engine.py), before each list a shard ranks
and at each widening of a cut (indexing/ranking.py), and between filter conditions (indexing/payload.py): one
shard's FAISS or BM25 pass itself runs to its end. Shards searched on Ray actors run in other processes and do not
see it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("vela_request_deadline", default=None)  # time.monotonic()


class DeadlineExceeded(Exception):
    """The request this work was for has passed its deadline (its client got a 503 `timeout`)."""


@contextmanager
def until(deadline: float | None) -> Iterator[None]:
    """Work inside the block stops at `deadline` (a time.monotonic() instant; None: no deadline)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check() -> None:
    """DeadlineExceeded when the current request's deadline has passed; nothing outside a request."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() >= deadline:
        raise DeadlineExceeded("the request's deadline passed: its work stopped")
