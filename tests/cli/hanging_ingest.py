"""`vela ingest` with one step made to hang inside a native call, for tests that press Ctrl-C there from outside
(tests/cli/test_ingest_ctrl_c.py):

    python -m tests.cli.hanging_ingest batch:N MARKER ingest --data ...   # the Nth encoded batch hangs
    python -m tests.cli.hanging_ingest merge MARKER ingest --data ...     # the background work after a commit hangs

MARKER is created when the hang begins. The hang is a default pthread mutex locked twice through ctypes: like a
long torch or FAISS call it runs without the GIL and no signal ends it, so Python's handlers run during it only
on another thread."""

from __future__ import annotations

import ctypes
import faulthandler
import signal
import sys
from pathlib import Path
from typing import Any


def hang(marker: Path) -> None:
    marker.write_text("hanging\n")
    mutex = ctypes.create_string_buffer(64)  # all zeros: PTHREAD_MUTEX_INITIALIZER (glibc), a default mutex
    libc = ctypes.CDLL(None)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # a default mutex locked again by its owner: never returns


def hang_in_batch(n: int, marker: Path) -> None:
    import indexing.ingest

    real = indexing.ingest.prepare_documents
    calls: list[int] = []

    def prepare(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == n:
            hang(marker)
        return real(*args, **kwargs)

    indexing.ingest.prepare_documents = prepare


def hang_after_commit(marker: Path) -> None:
    from indexing.merger import BACKGROUND

    real = BACKGROUND.request_merge

    def request_merge(store: Any, coll: Any) -> None:
        real(store, coll)
        BACKGROUND.submit("hang", lambda: hang(marker))

    BACKGROUND.request_merge = request_merge  # type: ignore[method-assign]


def main() -> int:
    # SIGUSR1 prints every thread's stack to stderr: a test that finds this process still running where it should
    # have ended shows where it was before killing it.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # Started as a non-interactive shell starts a background job (`make test &`, CI runners): SIGINT ignored. What
    # `vela ingest` does on Ctrl-C must not depend on the handler it inherits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    mode, marker, argv = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    if mode == "merge":
        hang_after_commit(marker)
    else:
        hang_in_batch(int(mode.removeprefix("batch:")), marker)
    from cli.main import main as vela

    return vela(argv)


if __name__ == "__main__":
    sys.exit(main())
