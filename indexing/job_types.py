"""What a job is: its kinds and statuses, the record the job store returns, and the errors it raises.

The API, the queues and the job runners all speak of jobs in these terms; indexing/jobs.py (which re-exports every
name here) stores them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED}


class JobKind(StrEnum):
    UPSERT = "upsert"
    DELETE = "delete"
    DELETE_BY_FILTER = "delete_by_filter"  # every stored document whose metadata passes a filter, when it runs
    PATCH = "patch"  # new metadata for documents, without re-embedding
    SCHEMA = "schema"  # declare metadata fields, once every stored value fits them
    REINDEX = "reindex"  # build a new generation with another embedder (indexing/reindex.py)
    PROMOTE = "promote"  # make a reindex's finished generation the one searches read
    ROLLBACK = "rollback"  # make the previous generation the one searches read again
    SNAPSHOT = "snapshot"  # write a collection's doc stores and settings to a tar (indexing/snapshots.py)
    RESTORE = "restore"  # make a new collection from a snapshot (indexing/snapshot_restore.py)


# Jobs that build or switch generations: hours of embedding, so they run beside the writes, not before them.
GENERATION_KINDS = frozenset({JobKind.REINDEX, JobKind.PROMOTE, JobKind.ROLLBACK})
# Switches of the generation searches read: they count no documents (total and done stay 0), so that progress, speed
# and `vela jobs wait` speak of none.
SWITCH_KINDS = frozenset({JobKind.PROMOTE, JobKind.ROLLBACK})
# Jobs run by indexing/snapshots.py; they run in the writes lane (a snapshot holds its collection's writer lock).
SNAPSHOT_KINDS = frozenset({JobKind.SNAPSHOT, JobKind.RESTORE})
# Jobs that run for long on the embedded queue's second lane, beside the writes: the generation jobs, and a restore
# (it rebuilds a whole index, and no write can reach the collection it makes until it is done).
LONG_KINDS = GENERATION_KINDS | {JobKind.RESTORE}


@dataclass(frozen=True)
class Job:
    id: str
    collection: str
    kind: JobKind
    status: JobStatus
    done: int
    total: int
    error: str | None
    cancel_requested: bool
    attempts: int
    created_at: float
    started_at: float | None
    finished_at: float | None
    result: dict[str, Any] | None = None  # what a job reports beyond its counts (a reindex's gate figures)

    @property
    def docs_per_s(self) -> float | None:
        if self.started_at is None or self.done == 0:
            return None
        elapsed = (self.finished_at or time.time()) - self.started_at
        return self.done / elapsed if elapsed > 0 else None

    @property
    def eta_s(self) -> float | None:
        rate = self.docs_per_s
        if self.status != JobStatus.RUNNING or not rate:
            return None
        return (self.total - self.done) / rate


# An absolute path in an error (a library's "no file named ... in directory /srv/vela/models/x"): GET /jobs shows
# errors to API callers, who must not learn the server's layout. The log keeps the whole message.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s'\"/:,;()]+/)+([^\s'\"/:,;()]*)")


def without_paths(error: str | None) -> str | None:
    """`error` with each absolute path cut to its last part: `/srv/vela/models/x` is `.../x`."""
    return None if error is None else _ABSOLUTE_PATH.sub(lambda m: ".../" + m.group(1), error)


class JobNotFound(KeyError):
    pass


class JobNotRetryable(ValueError):
    pass


class JobStoreMoved(RuntimeError):
    """The job store's file was removed or replaced while this process had it open (an operator's mistake, a
    restore of the data directory under a running server): a job recorded now would be written to a file no
    other process, and no restart, would ever read. Nothing is recorded until the process restarts."""
