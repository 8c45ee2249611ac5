"""After a commit: searchable in this process at once, and merges in a background thread at low priority.

Merges run in the process that writes the collection, one at a time, on a daemon thread whose CPU nice
value is raised (Linux threads have their own): searches and ingest keep the CPU first. A merge killed
with its process loses nothing (indexing/shard_writer.py): the next commit removes what it left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from typing import Any

log = logging.getLogger("vela.merge")
MERGE_NICE = 10


class MergeScheduler:
    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        self._pending: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.idle = threading.Event()
        self.idle.set()

    def request(self, store: Any, coll: Any) -> None:
        with self._lock:
            if id(coll) in self._pending:
                return
            self._pending.add(id(coll))
            self.idle.clear()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="vela-merge", daemon=True)
                self._thread.start()
        self._queue.put((store, coll))

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # not Linux: merges run at the normal priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MERGE_NICE)
        while True:
            store, coll = self._queue.get()
            with self._lock:
                self._pending.discard(id(coll))
            try:
                if coll.merge():
                    store.published(coll)
            except Exception:  # a failed merge leaves the shard as it was; the next commit asks again
                log.exception("merge failed", extra={"collection": coll.name})
            with self._lock:
                if not self._pending:
                    self.idle.set()


MERGES = MergeScheduler()


def after_commit(store: Any, coll: Any, *, merge: bool = True) -> None:
    store.published(coll)
    if merge:
        MERGES.request(store, coll)
