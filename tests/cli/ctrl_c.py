"""Ctrl-C pressed from inside a command that runs in this process (on its worker thread)."""

from __future__ import annotations

import signal
import threading

from cli.interrupts import GracefulStop


def ctrl_c_handled() -> None:
    """SIGINT to the main thread, returning once the command's GracefulStop handler there has taken it: the work
    goes on from a known point (it stops at its next safe point), whatever the threads' timing."""
    handler = signal.getsignal(signal.SIGINT)
    stop = getattr(handler, "__self__", None)
    assert isinstance(stop, GracefulStop), f"no GracefulStop handles SIGINT now: {handler!r}"
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() != main  # the handler runs on the main thread, not here
    signal.pthread_kill(main, signal.SIGINT)
    stop.asked.wait()
