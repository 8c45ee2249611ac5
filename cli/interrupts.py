"""Ctrl-C and SIGTERM for long CLI work: the first asks the work to stop at its next safe point, the second
stops it at once (KeyboardInterrupt)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any


class GracefulStop:
    """While entered (main thread only), SIGINT and SIGTERM set `requested` once; the next one raises
    KeyboardInterrupt. The handlers that were there before come back on exit."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.requested = False
        self._before: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{signal.Signals(signum).name}: {self.message} (again to stop at once)", file=sys.stderr)

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._before[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        for sig, handler in self._before.items():
            signal.signal(sig, handler)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While entered (main thread only), SIGTERM raises KeyboardInterrupt as Ctrl-C does, for work that has no safe
    point to stop at but cleans up on an interrupt: by default SIGTERM (systemd, docker stop, `timeout`) ends the
    process at once and no `finally` runs. The handler that was there before comes back on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
