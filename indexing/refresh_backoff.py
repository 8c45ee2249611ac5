"""The background reader's retries of a collection it cannot refresh: backed off per collection, logged once.

A collection whose files cannot be read (a manifest half-copied by hand, a full disk, no file handle left) fails
every tick of the reader. Tried every tick and logged each time, one such collection writes twenty warnings a
second; instead it is tried again after a delay that doubles from FIRST_DELAY_S up to MAX_DELAY_S, a warning is
logged when it starts failing (and when its error changes), and an info line when it is refreshed again. The same
goes for following a collection's serving generation (indexing/store.py keeps one of these for each)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0


@dataclass
class _Failing:
    error: str
    failures: int
    retry_at: float


class RefreshBackoff:
    """Which collections the reader skips for now, and the log lines of their failures and recoveries."""

    def __init__(
        self, log: logging.Logger, failed: str, recovered: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log = log
        self.messages = (failed, recovered)
        self.clock = clock
        self._failing: dict[str, _Failing] = {}
        self._lock = threading.Lock()  # the reader and requests (a stale collection is refreshed in the request)

    def due(self, name: str) -> bool:
        """Whether the reader tries `name` on this tick (always, unless it failed and its delay has not passed)."""
        failing = self._failing.get(name)
        return failing is None or self.clock() >= failing.retry_at

    def failed(self, name: str, error: str) -> None:
        with self._lock:
            failing = self._failing.get(name)
            failures = 1 if failing is None else failing.failures + 1
            delay = min(MAX_DELAY_S, FIRST_DELAY_S * 2 ** (failures - 1))
            self._failing[name] = _Failing(error, failures, self.clock() + delay)
        extra = {"collection": name, "error": error, "failures": failures, "retry_in_s": delay}
        if failing is None or failing.error != error:
            self.log.warning(self.messages[0], extra=extra)
        else:
            self.log.debug(self.messages[0], extra=extra)

    def succeeded(self, name: str) -> None:
        with self._lock:
            failing = self._failing.pop(name, None)
        if failing is not None:
            self.log.info(self.messages[1], extra={"collection": name, "failures": failing.failures})

    def forget(self, name: str) -> None:
        with self._lock:
            self._failing.pop(name, None)
