"""After a commit: searchable in this process at once; merges, and other work a commit makes due (the fusion
chosen again once a collection has doubled), in a background thread at low priority.

The work runs in the process that writes the collection, one piece at a time, on a daemon thread whose CPU
nice value is raised (Linux threads have their own): searches and ingest keep the CPU first, and on two cores
a merge and a fusion choice never compete with each other. Work killed with its process loses nothing: a
merge's leftovers are removed by the next commit (indexing/shard_writer.py), and a choice not made is still
due after the next ingest job.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable, Hashable
from typing import Any

from indexing.collection_settings import SETTINGS_FILE

log = logging.getLogger("vela.merge")
MERGE_NICE = 10


def deleted(coll: Any) -> bool:
    """Whether the collection (or the generation) `coll` was deleted: its settings file is gone, renamed away
    first by a delete (indexing/store.py), and with its folder by a generation's retirement."""
    return not (coll.root / SETTINGS_FILE).is_file()


class BackgroundWork:
    """A queue of work for one low-priority daemon thread; a key already waiting is not queued twice."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Hashable, Callable[[], None], Any]] = queue.Queue()
        self._pending: set[Hashable] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.idle = threading.Event()  # set while nothing is queued or running (benches and tests wait on it)
        self.idle.set()

    def submit(self, key: Hashable, work: Callable[[], None], coll: Any = None) -> None:
        """Queue `work` on `coll` (a collection, or None): work that fails once its collection was deleted (a DELETE
        right after an ingest) is no fault, and is logged at info; any other failure is an error."""
        with self._lock:
            if key in self._pending:
                return
            self._pending.add(key)
            self.idle.clear()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="vela-background", daemon=True)
                self._thread.start()
        self._queue.put((key, work, coll))

    def request_merge(self, store: Any, coll: Any) -> None:
        """Merge the collection's shards where the merge policy asks, then publish the result."""

        def merge() -> None:
            if deleted(coll):  # the collection was deleted while this merge waited: nothing to merge
                return
            # Deleted while it merges (a merge takes no writer lock), its files go from under it: `_run` says so.
            if coll.merge():
                store.published(coll)

        self.submit(("merge", id(coll)), merge, coll)

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # not Linux: the work runs at the normal priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MERGE_NICE)
        while True:
            key, work, coll = self._queue.get()
            with self._lock:
                self._pending.discard(key)
            what = str(key[0]) if isinstance(key, tuple) else ""
            try:
                work()
            except Exception as exc:  # failed work leaves the collection as it was; the next commit asks again
                if coll is not None and deleted(coll):  # its files went from under it (IndexNotReady, an I/O error)
                    extra = {"work": what, "collection": coll.name, "error": f"{type(exc).__name__}: {exc}"}
                    log.info("background work stopped: collection deleted", extra=extra)
                else:
                    log.exception("background work failed", extra={"work": what})
            with self._lock:
                if not self._pending:
                    self.idle.set()


BACKGROUND = BackgroundWork()  # merges and fusion choices share it: one background task at a time


def after_commit(store: Any, coll: Any, *, merge: bool = True) -> None:
    store.published(coll)
    if merge:
        BACKGROUND.request_merge(store, coll)


def wait_background(timeout: float | None = None) -> bool:
    """Block until the background work queued so far is done (True), or timeout seconds pass. A command that
    ingests and exits, or ingests and then measures, waits here: its results then depend on no thread timing,
    and a merge or fusion choice is not cut short by the process's end."""
    return BACKGROUND.idle.wait(timeout)
