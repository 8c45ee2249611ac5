"""Ctrl-C and SIGTERM for long CLI work: the first asks the work to stop at its next safe point, the second
stops it at once (KeyboardInterrupt).

Python runs a signal handler only in the main thread, between bytecodes: a main thread inside a long native
call (torch encoding, a FAISS build) runs it only when the call returns, tens of seconds later, and two Ctrl-C
pressed during that call arrive as one (a pending signal is not counted twice). Work that must answer Ctrl-C
at once therefore runs on a worker thread while the main thread waits in short joins (`run_off_main_thread`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")
# How long the main thread waits in one join: a signal the kernel gives another thread is handled by the main
# thread when its wait ends, so no later than this (a signal it gets itself ends the wait at once).
JOIN_S = 0.2


class GracefulStop:
    """While entered (main thread only), SIGINT and SIGTERM set `requested` once; the next one raises
    KeyboardInterrupt. The handlers that were there before come back on exit."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.asked = threading.Event()  # set by the first signal; other threads may wait on it
        self._before: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.asked.is_set()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.asked.set()
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
    """While entered (main thread only), SIGTERM and SIGINT raise KeyboardInterrupt, for work that has no safe point
    to stop at but cleans up on an interrupt: by default SIGTERM (systemd, docker stop, `timeout`) ends the process
    at once and no `finally` runs. SIGINT gets the same handler rather than whatever the process inherited: a
    process started in the background of a non-interactive shell inherits SIGINT ignored, and `kill -INT` (or a
    supervisor's Ctrl-C) would then do nothing here. The handlers that were there before come back on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    before = {sig: signal.signal(sig, _raise) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def run_off_main_thread(work: Callable[[], T], *, name: str) -> T:
    """`work()` on a daemon thread while this thread waits for it in short joins, so that the handlers of the
    signals that arrive meanwhile run at once, here; work's exception is raised here. A KeyboardInterrupt a
    handler raises here leaves the thread running, in the middle of whatever it does: the caller then ends the
    process with `exit_now`, which does not wait for it."""
    result: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work())
        except BaseException as e:  # handed to the waiting thread, which raises it
            failure.append(e)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(JOIN_S)
    if failure:
        raise failure[0]
    return result[0]


def exit_now(code: int) -> NoReturn:
    """End the process at once with `code`, whatever its other threads are doing: an interpreter's normal exit
    would stop a daemon thread in the middle of a native call or holding stderr's lock (a fatal error at exit).
    What was printed is flushed first; atexit handlers do not run."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said there
            stream.flush()
    os._exit(code)
