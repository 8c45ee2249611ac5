"""Job retention: the jobs that ended long ago are deleted from the job store (indexing/jobs.py), so that the
store stops growing under steady writes (`VELA_JOBS_RETENTION_DAYS`). Unfinished jobs are never deleted."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from indexing.job_types import TERMINAL

PURGE_EVERY_S = 600.0  # how often, at most, a process deletes the finished jobs past the retention
# Freed pages past this (payloads dropped as jobs end or are cancelled) are given back to the file system.
FREE_PAGES_KEPT_BYTES = 16 * 1024 * 1024


def purge_finished(conn: sqlite3.Connection, older_than_s: float) -> int:
    """Delete the jobs that ended (succeeded, failed, cancelled) more than `older_than_s` seconds ago; how many.
    Unfinished jobs are never deleted, however old. The freed pages are reused by new jobs, so the file stops
    growing once jobs end as fast as they come."""
    cutoff = time.time() - older_than_s
    marks = ",".join("?" * len(TERMINAL))
    cursor = conn.execute(
        f"DELETE FROM jobs WHERE status IN ({marks}) AND finished_at < ?",
        (*(s.value for s in TERMINAL), cutoff),
    )
    return cursor.rowcount


class JobRetention:
    """`retention_s`: finished jobs older than this are deleted (None: kept for ever). The job store calls
    `now_and_then` where jobs are made: a job store grows only by its writes, and a server that takes none has
    nothing to purge. It purges at most once every PURGE_EVERY_S in a process."""

    def __init__(self, conn: Callable[[], sqlite3.Connection], retention_s: float | None) -> None:
        self._conn = conn  # the job store's connection of the calling thread
        self.retention_s = retention_s
        self.next_purge = 0.0  # monotonic time of the next purge this process may run

    def now_and_then(self) -> None:
        if self.retention_s is None or time.monotonic() < self.next_purge:
            return
        self.next_purge = time.monotonic() + PURGE_EVERY_S
        purge_finished(self._conn(), self.retention_s)


def give_back_space(conn: sqlite3.Connection) -> None:
    """Give the pages freed by dropped payloads back to the file system, past FREE_PAGES_KEPT_BYTES, and cut the
    write-ahead log back: a queued job holds its documents (tens of megabytes), dropped when it ends or is
    cancelled. Only a store made with incremental auto-vacuum shrinks (job_schema.init_schema); an older one
    reuses its free pages for new jobs. Best effort: a busy database is left for the next time."""
    try:
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        if free > FREE_PAGES_KEPT_BYTES:
            conn.executescript("PRAGMA incremental_vacuum;")  # a page per step: executescript steps to the end
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.OperationalError:
        pass
