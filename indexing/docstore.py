"""The durable document store of one collection: SQLite in WAL mode, the source of truth.

Indexes are derived from it and can always be rebuilt from it: each passage row keeps its embedding.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexing.docstore_order import sync_fields, write_keys
from indexing.docstore_reads import DocStoreReads
from indexing.docstore_records import (
    DocumentRecord,
    PassageBatch,
    PassageHit,
    StoredDocument,
    _init_schema,
)
from velaio.files import connect_sqlite, init_sqlite, write_transaction

# How long a replaced passage's old text stays readable after the commit that replaced it in the index has
# published: past the request deadline (60 s by default) and a background reader's refresh, so that a search that
# started on the view before the publish still hydrates it.
REPLACED_GRACE_S = 300.0

__all__ = ["DocStore", "DocumentRecord", "PassageBatch", "PassageHit", "StoredDocument"]


class DocStore(DocStoreReads):
    """Thread-safe: one SQLite connection per thread, writes serialised by SQLite's own lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        init_sqlite(path, _init_schema)
        self._inode = path.stat().st_ino

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect_sqlite(self.path, foreign_keys=True)
            if self.path.stat().st_ino != self._inode:
                # The collection was deleted and one of its name made again: that store is not this one's.
                conn.close()
                raise sqlite3.OperationalError(f"document store {self.path} was deleted")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Forget every thread's connection (the collection is going away): each one closes when nothing holds
        it any more, at once for an idle one. Closing a connection another thread is reading through (a reindex
        copying the collection while it is deleted) crashed that thread inside SQLite; a thread that asks again
        afterwards gets an error (the files are gone), not a crash. The calling thread's own connection is closed
        now: its -wal is checkpointed and removed before the caller goes on (a restore syncs and renames the folder
        next), not whenever the garbage collector gets to it."""
        own: sqlite3.Connection | None = getattr(self._local, "conn", None)
        self._local = threading.local()
        if own is not None:
            own.close()

    # --- writes (the caller holds the collection's writer lock) ---------------------------------
    def upsert(self, docs: Iterable[StoredDocument]) -> int:
        """Replace each document and its passages in one transaction; returns the new change seq."""
        conn = self._conn()
        n_changed = 0
        written: list[tuple[str, dict[str, Any]]] = []
        with write_transaction(conn):
            for d in docs:
                conn.execute("DELETE FROM passages WHERE doc_id = ?", (d.doc_id,))
                conn.execute(
                    "INSERT INTO documents(doc_id, title, text, metadata, content_hash, context_id) "
                    "VALUES (?,?,?,?,?,?) ON CONFLICT(doc_id) DO UPDATE SET title=excluded.title, "
                    "text=excluded.text, metadata=excluded.metadata, content_hash=excluded.content_hash, "
                    "context_id=excluded.context_id",
                    (d.doc_id, d.title, d.text, json.dumps(d.metadata), d.content_hash, d.context_id),
                )
                n_changed += 1
                written.append((d.doc_id, d.metadata))
                emb = np.ascontiguousarray(d.embeddings, dtype=np.float32)
                first = d.first_pid
                conn.executemany(
                    "INSERT INTO passages(pid, doc_id, idx, start, end, embedding) VALUES (?,?,?,?,?,?)",
                    [
                        (None if first is None else first + i, d.doc_id, i, s, e, emb[i].tobytes())
                        for i, (s, e) in enumerate(d.spans)
                    ],
                )
            write_keys(conn, written)  # ordered scrolls' keys, in the transaction that stores the metadata
            conn.execute("UPDATE meta SET value = value + ? WHERE key = 'doc_changes'", (n_changed,))
            seq = self._bump(conn)
            return seq

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Delete documents (and their passages); returns how many existed."""
        conn = self._conn()
        with write_transaction(conn):
            n = 0
            for doc_id in doc_ids:
                conn.execute("DELETE FROM passages WHERE doc_id = ?", (doc_id,))
                n += conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,)).rowcount
            conn.execute("UPDATE meta SET value = value + ? WHERE key = 'doc_changes'", (n,))
            self._bump(conn)
            return n

    def replace_embeddings(self, doc_id: str, embeddings: np.ndarray, context_id: str) -> None:
        """New vectors for a document's passages, in passage order (pids unchanged): a context refresh."""
        self.replace_many([(doc_id, embeddings)], context_id)

    def replace_many(self, items: Sequence[tuple[str, np.ndarray]], context_id: str) -> int:
        conn = self._conn()
        with write_transaction(conn):
            for doc_id, embeddings in items:
                pids = [r[0] for r in conn.execute("SELECT pid FROM passages WHERE doc_id = ? ORDER BY idx", (doc_id,))]
                if len(pids) != len(embeddings):
                    raise ValueError(f"document {doc_id!r} has {len(pids)} passages, got {len(embeddings)} vectors")
                emb = np.ascontiguousarray(embeddings, dtype=np.float32)
                conn.executemany(
                    "UPDATE passages SET embedding = ? WHERE pid = ?",
                    [(emb[i].tobytes(), p) for i, p in enumerate(pids)],
                )
                conn.execute("UPDATE documents SET context_id = ? WHERE doc_id = ?", (context_id, doc_id))
            seq = self._bump(conn)
            return seq

    def rewrite_metadata(self, items: Sequence[tuple[str, dict[str, Any], str]], first_pid: int | None = None) -> int:
        """New metadata (and content hash) for documents, without re-embedding: each document's passages are
        inserted again with new ids and the same spans and embeddings, so that the next commit writes them into
        a new segment with the new metadata and tombstones the old rows (segments are immutable). Passage ids
        from `first_pid` on (a sharded collection numbers them across shards), else the autoincrement.
        Documents gone meanwhile are skipped. Returns the next free passage id."""
        conn = self._conn()
        with write_transaction(conn):
            pid = first_pid
            written: list[tuple[str, dict[str, Any]]] = []
            for doc_id, metadata, chash in items:
                rows = conn.execute(
                    "SELECT idx, start, end, embedding FROM passages WHERE doc_id = ? ORDER BY idx", (doc_id,)
                ).fetchall()
                cur = conn.execute(
                    "UPDATE documents SET metadata = ?, content_hash = ? WHERE doc_id = ?",
                    (json.dumps(metadata), chash, doc_id),
                )
                if cur.rowcount == 0:
                    continue
                written.append((doc_id, metadata))
                conn.execute("DELETE FROM passages WHERE doc_id = ?", (doc_id,))  # the trigger records them dead
                new = [(None if pid is None else pid + i, doc_id, *row) for i, row in enumerate(rows)]
                conn.executemany(
                    "INSERT INTO passages(pid, doc_id, idx, start, end, embedding) VALUES (?,?,?,?,?,?)", new
                )
                pid = None if pid is None else pid + len(rows)
            write_keys(conn, written)
            self._bump(conn)
        return pid if pid is not None else self.next_pid()

    def sync_order_fields(self, fields: Mapping[str, str]) -> bool:
        """Keep the sort keys of exactly these declared fields {name: type} (indexing/docstore_order.py): a new
        field's are written for every stored document, in one transaction. True when something was written."""
        return sync_fields(self._conn(), fields)

    @staticmethod
    def _bump(conn: sqlite3.Connection) -> int:
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'seq'")
        return int(conn.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0])

    def forget_dead(self, pids: np.ndarray) -> None:
        """Called once a published manifest marks these passages deleted. What the replaced ones showed is kept
        for REPLACED_GRACE_S more (searches on the view before this publish still hydrate them), then purged."""
        now = time.time()
        keys = [int(p) for p in pids]
        self._select_in("DELETE FROM dead_passages WHERE pid IN ({marks})", keys)
        self._select_in(f"UPDATE replaced_passages SET forgotten_at = {now!r} WHERE pid IN ({{marks}})", keys)
        self.purge_replaced(now)

    def purge_replaced(self, now: float | None = None) -> None:
        """Drop what replaced passages showed once REPLACED_GRACE_S have passed since their publish: at each publish
        that forgets passages, and at start-up (a collection written to no more keeps none for longer)."""
        now = time.time() if now is None else now
        self._conn().execute("DELETE FROM replaced_passages WHERE forgotten_at < ?", (now - REPLACED_GRACE_S,))
