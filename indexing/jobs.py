"""Durable job records: what to ingest or delete, its status and progress. SQLite, shared by processes."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from velaio.files import connect_sqlite, init_sqlite, rollback

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    collection TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    total INTEGER NOT NULL,
    error TEXT,
    payload TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    worker TEXT,
    result TEXT
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status);
"""


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


def _init_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    if "worker" not in columns:  # a jobs table from before workers had names
        conn.execute("ALTER TABLE jobs ADD COLUMN worker TEXT")
    if "result" not in columns:  # a jobs table from before jobs reported results
        conn.execute("ALTER TABLE jobs ADD COLUMN result TEXT")


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


class JobStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        init_sqlite(path, _init_schema)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect_sqlite(self.path)
            self._local.conn = conn
        return conn

    def create(self, *, collection: str, kind: JobKind, payload: list[Any]) -> Job:
        job_id = uuid.uuid4().hex
        self._conn().execute(*self._insert(job_id, collection, kind, payload))
        return self.get(job_id)

    def create_unless_unfinished(
        self, *, collection: str, kind: JobKind, payload: list[Any], kinds: frozenset[JobKind]
    ) -> Job | str:
        """Create the job unless a job of one of `kinds` on the collection is queued or running: then that job's
        id. One transaction, so that of two requests sent together (from any processes) only one gets a job."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            marks = ",".join("?" * len(kinds))
            row = conn.execute(
                f"SELECT id FROM jobs WHERE collection = ? AND kind IN ({marks}) AND status IN (?, ?) "
                "ORDER BY created_at LIMIT 1",
                (collection, *sorted(k.value for k in kinds), JobStatus.QUEUED.value, JobStatus.RUNNING.value),
            ).fetchone()
            if row is not None:
                conn.execute("COMMIT")
                return str(row[0])
            job_id = uuid.uuid4().hex
            conn.execute(*self._insert(job_id, collection, kind, payload))
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
        return self.get(job_id)

    @staticmethod
    def _insert(job_id: str, collection: str, kind: JobKind, payload: list[Any]) -> tuple[str, tuple[Any, ...]]:
        sql = "INSERT INTO jobs(id, collection, kind, status, total, payload, created_at) VALUES (?,?,?,?,?,?,?)"
        status, body = JobStatus.QUEUED.value, json.dumps(payload)
        return sql, (job_id, collection, kind.value, status, len(payload), body, time.time())

    def get(self, job_id: str) -> Job:
        row = (
            self._conn()
            .execute(
                "SELECT id, collection, kind, status, done, total, error, cancel_requested, attempts, "
                "created_at, started_at, finished_at, result FROM jobs WHERE id = ?",
                (job_id,),
            )
            .fetchone()
        )
        if row is None:
            raise JobNotFound(job_id)
        result = json.loads(row[12]) if row[12] else None
        attempts, created_at, started_at, finished_at = row[8:12]
        return Job(
            row[0],
            row[1],
            JobKind(row[2]),
            JobStatus(row[3]),
            row[4],
            row[5],
            row[6],
            bool(row[7]),
            attempts,
            created_at,
            started_at,
            finished_at,
            result,
        )

    def payload(self, job_id: str) -> list[Any]:
        row = self._conn().execute("SELECT payload FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        return list(json.loads(row[0] or "[]"))

    def unfinished(self) -> list[str]:
        """Jobs a crash may have interrupted, oldest first: they run again (at-least-once)."""
        rows = self._conn().execute(
            "SELECT id FROM jobs WHERE status IN (?, ?) ORDER BY created_at",
            (JobStatus.QUEUED.value, JobStatus.RUNNING.value),
        )
        return [r[0] for r in rows]

    def start(self, job_id: str, worker: str = "in-process") -> Job:
        self._conn().execute(
            "UPDATE jobs SET status = ?, started_at = COALESCE(started_at, ?), attempts = attempts + 1, "
            "worker = ? WHERE id = ?",
            (JobStatus.RUNNING.value, time.time(), worker, job_id),
        )
        return self.get(job_id)

    def progress(self, job_id: str, done: int, total: int | None = None) -> None:
        """Work done so far; `total` when the job learns its size only as it runs (a reindex counts documents)."""
        if total is None:
            self._conn().execute("UPDATE jobs SET done = ? WHERE id = ?", (done, job_id))
        else:
            self._conn().execute("UPDATE jobs SET done = ?, total = ? WHERE id = ?", (done, total, job_id))

    def set_result(self, job_id: str, result: dict[str, Any]) -> None:
        """Recorded as soon as it is known, not only at the end: a job resumed after a crash still reports it."""
        self._conn().execute("UPDATE jobs SET result = ? WHERE id = ?", (json.dumps(result), job_id))

    def finish(self, job_id: str, status: JobStatus, error: str | None = None) -> None:
        # The payload is dropped once the job is over (the documents now live in the collection), except
        # when it failed: a failed job (a full disk, say) can be run again with `requeue`.
        keep = "payload" if status == JobStatus.FAILED else "NULL"
        self._conn().execute(
            f"UPDATE jobs SET status = ?, error = ?, finished_at = ?, payload = {keep} WHERE id = ?",
            (status.value, without_paths(error), time.time(), job_id),
        )

    def fail_if_queued(self, job_id: str, error: str) -> bool:
        """Fail a job that no worker has started, in one statement; False when one has (or it has ended)."""
        cur = self._conn().execute(
            "UPDATE jobs SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status = ?",
            (JobStatus.FAILED.value, without_paths(error), time.time(), job_id, JobStatus.QUEUED.value),
        )
        return cur.rowcount == 1

    def requeue(self, job_id: str) -> Job:
        """Queue a failed job again (its error stays until it runs); JobNotRetryable unless it failed."""
        cur = self._conn().execute(
            "UPDATE jobs SET status = ?, done = 0, finished_at = NULL, cancel_requested = 0 "
            "WHERE id = ? AND status = ?",
            (JobStatus.QUEUED.value, job_id, JobStatus.FAILED.value),
        )
        job = self.get(job_id)
        if cur.rowcount == 0:
            raise JobNotRetryable(f"job {job_id!r} is {job.status.value}: only a failed job can be retried")
        return job

    def request_cancel(self, job_id: str) -> Job:
        """Queued jobs are cancelled at once; running ones stop at their next batch."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            job = self.get(job_id)
            if job.status == JobStatus.QUEUED:
                conn.execute(
                    "UPDATE jobs SET status = ?, finished_at = ?, payload = NULL, cancel_requested = 1 WHERE id = ?",
                    (JobStatus.CANCELLED.value, time.time(), job_id),
                )
            elif job.status == JobStatus.RUNNING:
                conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
        return self.get(job_id)

    def worker(self, job_id: str) -> str | None:
        """Which worker ran (or runs) the job last."""
        row = self._conn().execute("SELECT worker FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else row[0]

    def cancel_requested(self, job_id: str) -> bool:
        row = self._conn().execute("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return bool(row and row[0])

    def cancel_collection(self, collection: str) -> None:
        """A deleted collection's pending jobs are cancelled."""
        self._conn().execute(
            "UPDATE jobs SET cancel_requested = 1, status = CASE WHEN status = ? THEN ? ELSE status END "
            "WHERE collection = ? AND status IN (?, ?)",
            (
                JobStatus.QUEUED.value,
                JobStatus.CANCELLED.value,
                collection,
                JobStatus.QUEUED.value,
                JobStatus.RUNNING.value,
            ),
        )
