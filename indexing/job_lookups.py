"""The job store's reads that find a collection's jobs by kind and status (indexing/jobs.py delegates to them): one
write or restore at a time per collection, writes that run in the order they were sent (indexing/write_order.py),
and a document read back while its upsert is still queued."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from indexing.job_types import JobKind, JobStatus

UNFINISHED = (JobStatus.QUEUED.value, JobStatus.RUNNING.value)  # the statuses a job can still leave


def ids_by_status(
    conn: sqlite3.Connection, statuses: tuple[str, ...], recorded_before: float | None = None
) -> list[str]:
    """The ids of the jobs in `statuses` (recorded before `recorded_before`, a time.time(), when given), oldest
    first."""
    sql = f"SELECT id FROM jobs WHERE status IN ({','.join('?' * len(statuses))})"
    params: tuple[Any, ...] = statuses
    if recorded_before is not None:
        sql, params = sql + " AND created_at < ?", (*statuses, recorded_before)
    return [r[0] for r in conn.execute(sql + " ORDER BY created_at", params)]


def _first_id(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> str | None:
    """The id in the first row `sql` selects, or None."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else str(row[0])


def _kinds(kinds: frozenset[JobKind]) -> tuple[str, tuple[str, ...]]:
    """The `IN (...)` placeholders of `kinds` and their values."""
    return ",".join("?" * len(kinds)), tuple(sorted(k.value for k in kinds))


def unfinished_of(conn: sqlite3.Connection, collection: str, kinds: frozenset[JobKind]) -> str | None:
    """A queued or running job of one of `kinds` on the collection (the oldest), or None."""
    marks, values = _kinds(kinds)
    return _first_id(
        conn,
        f"SELECT id FROM jobs WHERE collection = ? AND kind IN ({marks}) AND status IN (?, ?) "
        "ORDER BY created_at LIMIT 1",
        (collection, *values, *UNFINISHED),
    )


def latest_of(conn: sqlite3.Connection, collection: str, kinds: frozenset[JobKind]) -> str | None:
    """The newest job of one of `kinds` on the collection, whatever its status, or None."""
    marks, values = _kinds(kinds)
    return _first_id(
        conn,
        f"SELECT id FROM jobs WHERE collection = ? AND kind IN ({marks}) ORDER BY created_at DESC LIMIT 1",
        (collection, *values),
    )


def older_unfinished(conn: sqlite3.Connection, job_id: str, kinds: frozenset[JobKind]) -> str | None:
    """The oldest queued or running job of one of `kinds` on `job_id`'s collection recorded before it."""
    marks, values = _kinds(kinds)
    return _first_id(
        conn,
        f"SELECT o.id FROM jobs o JOIN jobs j ON j.id = ? WHERE o.collection = j.collection "
        f"AND o.created_at < j.created_at AND o.id != j.id AND o.kind IN ({marks}) AND o.status IN (?, ?) "
        "ORDER BY o.created_at LIMIT 1",
        (job_id, *values, *UNFINISHED),
    )


def pending_document(conn: sqlite3.Connection, collection: str, doc_id: str) -> dict[str, Any] | None:
    """The document `doc_id` as the newest queued or running upsert of the collection sent it, or None: what the
    collection will hold once the writes recorded before now have run. Reads only unfinished jobs' payloads (a
    finished job's is dropped), each at most a batch."""
    sql = (
        "SELECT d.value FROM jobs, json_each(jobs.payload) AS d WHERE jobs.collection = ? AND jobs.kind = ? "
        "AND jobs.status IN (?, ?) AND json_extract(d.value, '$.id') = ? ORDER BY jobs.created_at DESC LIMIT 1"
    )
    row = conn.execute(sql, (collection, JobKind.UPSERT.value, *UNFINISHED, doc_id)).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def count_unfinished(conn: sqlite3.Connection) -> int:
    """Jobs queued or running (a count over the status index, never the rows and their payloads)."""
    marks = ",".join("?" * len(UNFINISHED))
    row = conn.execute(f"SELECT COUNT(*) FROM jobs WHERE status IN ({marks})", UNFINISHED).fetchone()
    return int(row[0])
