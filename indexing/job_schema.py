"""The jobs table of indexing/jobs.py's store, how an older one is brought up to date, and how a row is read."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from indexing.job_counts import init_counts
from indexing.job_types import SWITCH_KINDS, Job, JobKind, JobStatus

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
    result TEXT,
    lease_owner TEXT,
    lease_until REAL
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_at, id);
"""


def init_schema(conn: sqlite3.Connection) -> None:
    # A new store gives the pages of dropped payloads back to the file system (JobStore.give_back_space). The mode
    # of a database that has pages takes a VACUUM to change: done while it is empty (an older store, with its
    # jobs, keeps reusing its free pages instead).
    new = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'jobs'").fetchone() is None
    if new and conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0:
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("VACUUM")
    conn.executescript(SCHEMA)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    if "worker" not in columns:  # a jobs table from before workers had names
        conn.execute("ALTER TABLE jobs ADD COLUMN worker TEXT")
    if "result" not in columns:  # a jobs table from before jobs reported results
        conn.execute("ALTER TABLE jobs ADD COLUMN result TEXT")
    if "lease_owner" not in columns:  # a jobs table from before workers leased their jobs (indexing/job_leases.py)
        conn.execute("ALTER TABLE jobs ADD COLUMN lease_owner TEXT")
        conn.execute("ALTER TABLE jobs ADD COLUMN lease_until REAL")
    init_counts(conn)  # the totals kept for metrics, by triggers on this table


JOB_COLUMNS = (
    "id, collection, kind, status, done, total, error, cancel_requested, attempts, created_at, started_at, "
    "finished_at, result"
)


def job_of_row(row: tuple[Any, ...]) -> Job:
    """A Job from the first 13 columns of a row selected as JOB_COLUMNS."""
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


def select_listing(
    conn: sqlite3.Connection,
    collection: str | None,
    statuses: frozenset[JobStatus],
    kinds: frozenset[JobKind],
    limit: int,
    before: tuple[float, str] | None,
) -> list[tuple[Job, str | None]]:
    """JobStore.listing's query: (job, worker) newest first, through the (created_at, id) index."""
    where: list[str] = ["1 = 1"]
    params: list[Any] = []
    if collection is not None:
        where.append("collection = ?")
        params.append(collection)
    for column, values in (("status", statuses), ("kind", kinds)):
        if values:
            where.append(f"{column} IN ({', '.join('?' * len(values))})")
            params.extend(sorted(v.value for v in values))
    if before is not None:
        where.append("(created_at < ? OR (created_at = ? AND id < ?))")
        params.extend([before[0], before[0], before[1]])
    rows = conn.execute(
        f"SELECT {JOB_COLUMNS}, worker FROM jobs WHERE {' AND '.join(where)} ORDER BY created_at DESC, id DESC LIMIT ?",
        (*params, limit),
    )
    return [(job_of_row(row), row[13]) for row in rows]


def insert_job(
    job_id: str, collection: str, kind: JobKind, payload: list[Any], running_in: str | None = None
) -> tuple[str, tuple[Any, ...]]:
    """The INSERT of a new job: queued, or with `running_in` recorded as running there since now."""
    sql = (
        "INSERT INTO jobs(id, collection, kind, status, total, payload, created_at, started_at, worker) "
        "VALUES (?,?,?,?,?,?,?,?,?)"
    )
    now, body = time.time(), json.dumps(payload)
    status = JobStatus.QUEUED if running_in is None else JobStatus.RUNNING
    started = None if running_in is None else now
    total = 0 if kind in SWITCH_KINDS else len(payload)  # a switch's payload is its spec, not documents
    return sql, (job_id, collection, kind.value, status.value, total, body, now, started, running_in)
