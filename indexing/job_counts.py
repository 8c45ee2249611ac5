"""Counts of the job store for metrics: jobs by kind and status now, and totals that only grow.

The totals are kept by SQLite triggers on the jobs table, so they count every job whichever process ran it (an API
process, a `vela worker`, a CLI command) and outlive the finished jobs themselves, which retention deletes
(indexing/job_retention.py). A scrape reads them with a few small queries (service/metric_collectors.py).

- jobs finished, by kind and status: each change of a job's status from queued or running to succeeded, failed or
  cancelled. A failed job retried (POST /jobs/{id}/retry) that ends again counts again.
- documents indexed, by kind (upsert, reindex): what the jobs' `done` grows by as they record their progress. A
  job run again after a crash starts its count again from 0 (its documents are gone through again, unchanged ones
  skipped), and what it goes through again counts again.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from indexing.job_types import TERMINAL, JobKind, JobStatus

# Kinds whose `done` counts documents embedded into an index (a delete's counts documents removed).
INDEXING_KINDS = (JobKind.UPSERT, JobKind.REINDEX)

_ENDED = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL))
_INDEXING = ", ".join(f"'{k.value}'" for k in INDEXING_KINDS)

# jobs_status_kind makes the count by kind and status a scan of that index alone, never of the rows and their
# payloads (a queued or failed job keeps its documents in the row).
# In jobs_count_progress, `done` going down means the job started over (run again after a crash, or retried):
# what it has done since counts, not the difference. The statement that ends a job is not progress: a job that
# succeeds is shown done in full (indexing/job_endings.py), which indexed nothing more. (jobs_count_documents was
# its name before it left that statement out.)
SCHEMA = f"""
CREATE INDEX IF NOT EXISTS jobs_status_kind ON jobs(status, kind);
CREATE TABLE IF NOT EXISTS jobs_finished (
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (kind, status)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS documents_indexed (
    kind TEXT PRIMARY KEY,
    n INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS jobs_count_finished AFTER UPDATE OF status ON jobs
WHEN NEW.status IN ({_ENDED}) AND OLD.status NOT IN ({_ENDED})
BEGIN
    INSERT INTO jobs_finished (kind, status, n) VALUES (NEW.kind, NEW.status, 1)
    ON CONFLICT (kind, status) DO UPDATE SET n = n + 1;
END;
DROP TRIGGER IF EXISTS jobs_count_documents;
CREATE TRIGGER IF NOT EXISTS jobs_count_progress AFTER UPDATE OF done ON jobs
WHEN NEW.kind IN ({_INDEXING}) AND NEW.done != OLD.done AND NEW.done > 0 AND NEW.status = OLD.status
BEGIN
    INSERT INTO documents_indexed (kind, n)
    VALUES (NEW.kind, CASE WHEN NEW.done > OLD.done THEN NEW.done - OLD.done ELSE NEW.done END)
    ON CONFLICT (kind) DO UPDATE SET n = n + excluded.n;
END;
"""


class JobCounts(NamedTuple):
    by_status: dict[tuple[str, str], int]  # (kind, status) -> jobs in the store now
    finished: dict[tuple[str, str], int]  # (kind, status) -> jobs that ended so, in total
    documents: dict[str, int]  # kind -> documents indexed by its jobs, in total


def init_counts(conn: sqlite3.Connection) -> None:
    """The totals' tables and triggers (a store from before them starts its totals at 0)."""
    conn.executescript(SCHEMA)


def read_counts(conn: sqlite3.Connection) -> JobCounts:
    """All three, read in one transaction so that they agree with each other."""
    conn.execute("BEGIN")
    try:
        return JobCounts(jobs_by_status(conn), jobs_finished(conn), documents_indexed(conn))
    finally:
        conn.execute("COMMIT")


def jobs_by_status(conn: sqlite3.Connection) -> dict[tuple[str, str], int]:
    """(kind, status) -> jobs in the store now, every pair present (0 where none): a gauge's series stay."""
    out = {(k.value, s.value): 0 for k in JobKind for s in JobStatus}
    for kind, status, n in conn.execute("SELECT kind, status, COUNT(*) FROM jobs GROUP BY kind, status"):
        out[(kind, status)] = n
    return out


def jobs_finished(conn: sqlite3.Connection) -> dict[tuple[str, str], int]:
    """(kind, status) -> jobs that ended so with that status, since the store had these totals."""
    return {(kind, status): n for kind, status, n in conn.execute("SELECT kind, status, n FROM jobs_finished")}


def documents_indexed(conn: sqlite3.Connection) -> dict[str, int]:
    """kind -> documents its jobs went through (INDEXING_KINDS, each present)."""
    out = {k.value: 0 for k in INDEXING_KINDS}
    out.update(dict(conn.execute("SELECT kind, n FROM documents_indexed")))
    return out
