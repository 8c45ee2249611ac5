"""The deadline of the request an engine call works for: long scans check it and stop once it has passed.

The engine does not know about HTTP requests; the service's request guard opens `until()` around each request
with its deadline (VELA_REQUEST_TIMEOUT_S) and an event it sets when the client goes away (work for a closed
connection stops as work past its deadline does), and both live in a context variable, so the thread that runs
the request's engine call (the thread pool runs it with a copy of the request's context) sees it, and concurrent
requests keep their own. Past the deadline the client has had its 503 already: `check()` raises DeadlineExceeded
so that the work stops there instead of running on for nobody. Calls outside a request (jobs, delete by filter,
the CLI) have no deadline and never stop. Checked between shards (indexing/engine.py), before each list a shard ranks
and at each widening of a cut (indexing/ranking.py), and between filter conditions (indexing/payload.py): one
shard's FAISS or BM25 pass itself runs to its end. Shards searched on Ray actors run in other processes and do not
see it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """When a request's work stops: at `at` (time.monotonic(); None: never), or once `gone` is set (its client
    closed the connection)."""

    at: float | None
    gone: threading.Event | None = None

    def spent(self) -> bool:
        return (self.at is not None and time.monotonic() >= self.at) or (self.gone is not None and self.gone.is_set())


_BUDGET: ContextVar[Budget | None] = ContextVar("vela_request_budget", default=None)


class DeadlineExceeded(Exception):
    """The request this work was for has passed its deadline (its client got a 503 `timeout`) or has no client."""


@contextmanager
def until(deadline: float | None, gone: threading.Event | None = None) -> Iterator[None]:
    """Work inside the block stops at `deadline` (a time.monotonic() instant; None: no deadline), or once `gone`
    is set."""
    token = _BUDGET.set(Budget(deadline, gone))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def current() -> Budget | None:
    """The budget of the request this thread works for (None outside a request): work handed to another thread
    (the query encoder's) carries it along."""
    return _BUDGET.get()


def check() -> None:
    """DeadlineExceeded when the current request's deadline has passed or its client has gone; nothing outside
    a request."""
    budget = _BUDGET.get()
    if budget is not None and budget.spent():
        raise DeadlineExceeded("the request's deadline passed, or its client went away: its work stopped")
