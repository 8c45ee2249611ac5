"""The jobs table of indexing/jobs.py's store, and how an older one is brought up to date."""

from __future__ import annotations

import sqlite3

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


def init_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    if "worker" not in columns:  # a jobs table from before workers had names
        conn.execute("ALTER TABLE jobs ADD COLUMN worker TEXT")
    if "result" not in columns:  # a jobs table from before jobs reported results
        conn.execute("ALTER TABLE jobs ADD COLUMN result TEXT")
