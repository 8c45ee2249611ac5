"""The statements that end a job or take it back (indexing/jobs.py `JobStore` calls them with its connection):
finish, fail before a start, requeue after a failure, cancel one job or a deleted collection's. Each is one
conditional statement or one transaction, so that two processes ending one job at once cannot both do it."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from indexing.job_lookups import UNFINISHED
from indexing.job_types import JobStatus
from velaio.files import write_transaction

_QUEUED, _RUNNING, _CANCELLED = JobStatus.QUEUED.value, JobStatus.RUNNING.value, JobStatus.CANCELLED.value


def finish(
    conn: sqlite3.Connection, job_id: str, status: JobStatus, error: str | None, result: dict[str, Any] | None
) -> bool:
    """End an unfinished job with `status` (and `result` when given); False when it had ended already."""
    # The payload is dropped once the job is over (the documents now live in the collection), except
    # when it failed: a failed job (a full disk, say) can be run again with `requeue`.
    keep = "payload" if status == JobStatus.FAILED else "NULL"
    new_result = "result" if result is None else "?"
    values = () if result is None else (json.dumps(result),)
    # A job that succeeded did all its work, whatever its last progress said (a resumed reindex that found its
    # generation built before a crash has nothing left to count).
    done = "COALESCE(total, done)" if status == JobStatus.SUCCEEDED else "done"
    cur = conn.execute(
        f"UPDATE jobs SET status = ?, error = ?, finished_at = ?, payload = {keep}, result = {new_result}, "
        f"done = {done} WHERE id = ? AND status IN (?, ?)",
        (status.value, error, time.time(), *values, job_id, *UNFINISHED),
    )
    return cur.rowcount == 1


def fail_if_queued(conn: sqlite3.Connection, job_id: str, error: str | None) -> bool:
    cur = conn.execute(
        "UPDATE jobs SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status = ?",
        (JobStatus.FAILED.value, error, time.time(), job_id, _QUEUED),
    )
    return cur.rowcount == 1


def requeue(conn: sqlite3.Connection, job_id: str) -> bool:
    """A failed job queued again, as a new one is (no progress, start, end, error or cancel); False otherwise."""
    cur = conn.execute(
        "UPDATE jobs SET status = ?, done = 0, started_at = NULL, finished_at = NULL, cancel_requested = 0, "
        "error = NULL WHERE id = ? AND status = ?",
        (_QUEUED, job_id, JobStatus.FAILED.value),
    )
    return cur.rowcount == 1


def request_cancel(conn: sqlite3.Connection, job_id: str) -> bool:
    """A queued job cancelled now, a running one asked to stop; an ended one left. False: there is no such job."""
    with write_transaction(conn):
        row = conn.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is not None and row[0] == _QUEUED:
            conn.execute(
                "UPDATE jobs SET status = ?, finished_at = ?, payload = NULL, cancel_requested = 1 WHERE id = ?",
                (_CANCELLED, time.time(), job_id),
            )
        elif row is not None and row[0] == _RUNNING:
            conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
    return row is not None


def cancel_collection(conn: sqlite3.Connection, collection: str) -> None:
    """Every unfinished job of the collection: the queued ones cancelled now, the running ones asked to stop."""
    with write_transaction(conn):
        conn.execute(
            "UPDATE jobs SET status = ?, finished_at = ?, payload = NULL, cancel_requested = 1 "
            "WHERE collection = ? AND status = ?",
            (_CANCELLED, time.time(), collection, _QUEUED),
        )
        conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE collection = ? AND status = ?", (collection, _RUNNING))
