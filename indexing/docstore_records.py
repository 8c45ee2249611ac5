"""The doc store's tables and the records it reads and writes (indexing/docstore.py is the store itself)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexing.docstore_order import SCHEMA as ORDER_SCHEMA

SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    content_hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS passages (
    pid INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS passages_doc ON passages(doc_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('seq', 0);
INSERT OR IGNORE INTO meta(key, value) VALUES ('doc_changes', 0);
-- Passages deleted or replaced since the last commit: the commit marks them in its segments' deletion
-- bitmaps, then forgets them. A trigger, so that no write path can forget to record one.
CREATE TABLE IF NOT EXISTS dead_passages (pid INTEGER PRIMARY KEY);
CREATE TRIGGER IF NOT EXISTS passages_dead AFTER DELETE ON passages
BEGIN INSERT OR IGNORE INTO dead_passages(pid) VALUES (old.pid); END;
-- What a replaced passage showed (its slice of the old text, the old title and metadata), read by searches until
-- the commit that replaces it in the index has been served a while: the published index still ranks the old
-- passage, and a hit on it shows the document as it was, not nothing. Deleting a passage records it: the
-- document row still holds the old version then (an upsert deletes passages before it updates the document).
-- `forgotten_at`: when the commit that marked it deleted published (NULL before), for the purge.
CREATE TABLE IF NOT EXISTS replaced_passages (
    pid INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    forgotten_at REAL
);
CREATE TRIGGER IF NOT EXISTS passages_replaced AFTER DELETE ON passages
BEGIN INSERT OR REPLACE INTO replaced_passages(pid, doc_id, idx, start, end, title, text, metadata)
    SELECT old.pid, old.doc_id, old.idx, old.start, old.end, d.title,
           substr(d.text, old.start + 1, old.end - old.start), d.metadata
    FROM documents d WHERE d.doc_id = old.doc_id; END;
"""
# Added after the first release; older stores gain the column on open. Which corpus context (CDE) the
# document's passage vectors were made with: '' for a non-contextual embedder.
MIGRATIONS = ("ALTER TABLE documents ADD COLUMN context_id TEXT NOT NULL DEFAULT ''",)


@dataclass(frozen=True)
class StoredDocument:
    """A document ready to store: its passages' spans and embeddings are computed already."""

    doc_id: str
    title: str
    text: str
    metadata: dict[str, Any]
    content_hash: str
    spans: Sequence[tuple[int, int]]  # (start, end) character offsets, one per passage
    embeddings: np.ndarray  # (P, d) float32, one row per span
    context_id: str = ""  # the corpus context the embeddings were made with (CDE collections)
    # Passage ids first_pid, first_pid + 1, ...; None: the store's own autoincrement. A sharded collection
    # numbers passages across its shards, as one store would (indexing/shards.py).
    first_pid: int | None = None


@dataclass(frozen=True)
class PassageBatch:
    """Passages in pid order, as a commit reads them into a new segment."""

    pids: np.ndarray  # (n,) int64
    docs: np.ndarray  # (n,) int64 document numbers (the documents table's rowid)
    texts: list[str]  # title + passage text
    embeddings: np.ndarray  # (n, d) float32
    metadata: list[str]  # each passage's document metadata, JSON text as stored


@dataclass(frozen=True)
class PassageHit:
    pid: int
    doc_id: str
    index: int
    start: int
    end: int
    title: str
    text: str  # the passage's own text
    metadata: dict[str, Any]


@dataclass(frozen=True)
class DocumentRecord:
    """A stored document as it was indexed; `passages` (pid, index, start, end) when asked for."""

    doc_id: str
    title: str
    text: str
    metadata: dict[str, Any]
    content_hash: str
    passages: list[tuple[int, int, int, int]] | None = None


def _init_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)
    conn.executescript(ORDER_SCHEMA)  # the sort keys of ordered scrolls (indexing/docstore_order.py)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(documents)")}
    if "context_id" not in columns:
        for sql in MIGRATIONS:
            conn.execute(sql)
