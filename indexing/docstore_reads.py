"""The reads of a collection's doc store (indexing/docstore.py holds the class and its writes).

Every read runs on the calling thread's own connection; a read that must see one version of several tables runs
in one read transaction (WAL: a snapshot, no write lock).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from indexing.docstore_order import Ordering, Position, Row, ordered_fields, rows_after
from indexing.docstore_records import DocumentRecord, PassageBatch, PassageHit, StoredDocument
from velaio.files import rollback
from velaio.text import passage_text

# A passage's own text, cut in SQL so that only the slice leaves SQLite: substr counts characters (code points)
# from 1 as the spans count them from 0 in Python, up to a NUL character, where it stops (_sliced_in_python).
_PASSAGE_SLICE = "substr(d.text, p.start + 1, p.end - p.start)"


class DocStoreReads:
    def _conn(self) -> sqlite3.Connection:  # DocStore's: one connection per thread
        raise NotImplementedError

    def seq(self) -> int:
        """A counter bumped by every committed write: indexes record the seq they reflect."""
        return int(self._conn().execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0])

    def next_pid(self) -> int:
        """The id AUTOINCREMENT would give the next passage (ids are never reused, even after deletes)."""
        row = self._conn().execute("SELECT seq FROM sqlite_sequence WHERE name = 'passages'").fetchone()
        return int(row[0]) + 1 if row else 1

    def doc_changes(self) -> int:
        """Documents written or deleted since the store was made (each upsert or delete counts once)."""
        return int(self._conn().execute("SELECT value FROM meta WHERE key = 'doc_changes'").fetchone()[0])

    def stale_documents(self, context_id: str, limit: int) -> list[tuple[str, str, str, list[tuple[int, int]]]]:
        """Documents whose vectors were made with another context: (doc_id, title, text, passage spans)."""
        conn = self._conn()
        rows = conn.execute(
            "SELECT doc_id, title, text FROM documents WHERE context_id != ? ORDER BY rowid LIMIT ?",
            (context_id, limit),
        ).fetchall()
        out = []
        for doc_id, title, text in rows:
            spans = conn.execute("SELECT start, end FROM passages WHERE doc_id = ? ORDER BY idx", (doc_id,)).fetchall()
            out.append((doc_id, title, text, [(int(a), int(b)) for a, b in spans]))
        return out

    def count_stale(self, context_id: str) -> int:
        q = "SELECT COUNT(*) FROM documents WHERE context_id != ?"
        return int(self._conn().execute(q, (context_id,)).fetchone()[0])

    def document_ids(self) -> list[str]:
        return [r[0] for r in self._conn().execute("SELECT doc_id FROM documents ORDER BY rowid")]

    def document_texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """What a context embedder reads for a whole document: title + newline + text."""
        rows = self._select_in("SELECT doc_id, title, text FROM documents WHERE doc_id IN ({marks})", list(doc_ids))
        return {doc_id: passage_text(title, text) for doc_id, title, text in rows}

    def counts(self) -> tuple[int, int]:
        conn = self._conn()
        docs = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        passages = conn.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        return int(docs), int(passages)

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction around several reads (deferred: a snapshot, no write lock), so that a write between
        them cannot pair one version's rows with another's; inside a transaction already open, that one."""
        conn = self._conn()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            rollback(conn)

    def _select_in(self, sql: str, keys: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run `sql` (with one `{marks}` placeholder list) over keys, 500 at a time (SQLite's variable cap)."""
        conn = self._conn()
        rows: list[tuple[Any, ...]] = []
        for i in range(0, len(keys), 500):
            part = list(keys[i : i + 500])
            rows.extend(conn.execute(sql.format(marks=",".join("?" * len(part))), part).fetchall())
        return rows

    def doc_numbers(self, doc_ids: Sequence[str]) -> dict[str, int]:
        """The document number (rowid: what a segment's rows name) of each of `doc_ids` the store holds."""
        return dict(self._select_in("SELECT doc_id, rowid FROM documents WHERE doc_id IN ({marks})", doc_ids))  # type: ignore[arg-type]

    def document(self, doc_id: str, *, passages: bool = True) -> DocumentRecord | None:
        """One stored document (None when there is none), with its passages in order when asked."""
        conn = self._conn()
        row = conn.execute(
            "SELECT title, text, metadata, content_hash FROM documents WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        if row is None:
            return None
        spans = None
        if passages:
            q = "SELECT pid, idx, start, end FROM passages WHERE doc_id = ? ORDER BY idx"
            spans = [(int(p), int(i), int(a), int(b)) for p, i, a, b in conn.execute(q, (doc_id,))]
        return DocumentRecord(doc_id, row[0], row[1], json.loads(row[2]), row[3], spans)

    def documents(self, doc_ids: Sequence[str]) -> dict[str, DocumentRecord]:
        """The stored documents among `doc_ids` (without passages)."""
        rows = self._select_in(
            "SELECT doc_id, title, text, metadata, content_hash FROM documents WHERE doc_id IN ({marks})",
            list(doc_ids),
        )
        return {r[0]: DocumentRecord(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows}

    def stored_documents(self, doc_ids: Sequence[str]) -> dict[str, StoredDocument]:
        """The stored documents among `doc_ids` as they were written: spans and vectors in passage order, read in
        one transaction (a write between the two reads would pair a text with another version's vectors)."""
        with self._snapshot():
            docs = self.documents(doc_ids)
            rows = self._select_in(
                "SELECT doc_id, start, end, embedding FROM passages WHERE doc_id IN ({marks}) ORDER BY doc_id, idx",
                list(docs),
            )
        spans: dict[str, list[tuple[int, int]]] = {}
        vectors: dict[str, list[np.ndarray]] = {}
        for doc_id, start, end, emb in rows:
            spans.setdefault(doc_id, []).append((int(start), int(end)))
            vectors.setdefault(doc_id, []).append(np.frombuffer(emb, dtype=np.float32))
        return {
            d: StoredDocument(d, r.title, r.text, r.metadata, r.content_hash, spans[d], np.stack(vectors[d]))
            for d, r in docs.items()
            if d in spans
        }

    def passage_vectors(self, doc_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """doc id -> (P, d) float32, its passages' stored vectors in passage order; no text is read."""
        rows = self._select_in(
            "SELECT doc_id, embedding FROM passages WHERE doc_id IN ({marks}) ORDER BY doc_id, idx", list(doc_ids)
        )
        vectors: dict[str, list[np.ndarray]] = {}
        for doc_id, emb in rows:
            vectors.setdefault(doc_id, []).append(np.frombuffer(emb, dtype=np.float32))
        return {d: np.stack(v) for d, v in vectors.items()}

    def metadata_after(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        """(doc_id, metadata JSON text) of the first `limit` documents with ids above `after`, by id (the
        primary key's order: SQLite compares text as UTF-8 bytes, which is code point order, as Python does)."""
        conn = self._conn()
        if after is None:
            q = "SELECT doc_id, metadata FROM documents ORDER BY doc_id LIMIT ?"
            return conn.execute(q, (limit,)).fetchall()
        q = "SELECT doc_id, metadata FROM documents WHERE doc_id > ? ORDER BY doc_id LIMIT ?"
        return conn.execute(q, (after, limit)).fetchall()

    def ordered_after(self, ordering: Ordering, after: Position | None, limit: int) -> list[Row]:
        """(doc_id, metadata JSON text, value) of the first `limit` documents past `after` in the ordering (see
        indexing/docstore_order.py), read in one transaction: one version of the keys and the documents."""
        with self._snapshot() as conn:
            return rows_after(conn, ordering, after, limit)

    def order_fields(self) -> dict[str, str]:
        """The fields this store keeps sort keys of: {name: type}."""
        return ordered_fields(self._conn())

    def content_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        return dict(self._select_in("SELECT doc_id, content_hash FROM documents WHERE doc_id IN ({marks})", doc_ids))

    def passage_docs(self, pids: Sequence[int]) -> dict[int, str]:
        """Document id of each passage that still exists."""
        keys = [int(p) for p in pids]
        return dict(self._select_in("SELECT pid, doc_id FROM passages WHERE pid IN ({marks})", keys))

    def dead_pids(self) -> np.ndarray:
        """Passages deleted or replaced since the last commit forgot them: (m,) int64."""
        rows = self._conn().execute("SELECT pid FROM dead_passages").fetchall()
        return np.asarray([r[0] for r in rows], dtype=np.int64)

    def count_after(self, pid: int) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM passages WHERE pid > ?", (pid,)).fetchone()[0])

    def passages(self, pids: Sequence[int]) -> dict[int, PassageHit]:
        """The passages that still exist, with their document's title and metadata, and those replaced since the
        last commits (as they were: replaced_passages) of documents that still exist.

        A hit reads its passage's own slice of the text (not the whole document: a search for 100 hits of 1 MB
        documents would move 100 MB), and each document's title and metadata once, in the same read transaction.
        The passages of one document share one metadata dict: its readers (search, the gate, the adapt teacher)
        never change it."""
        with self._snapshot():
            rows = self._select_in(
                f"SELECT p.pid, p.doc_id, p.idx, p.start, p.end, {_PASSAGE_SLICE} "
                "FROM passages p JOIN documents d ON d.doc_id = p.doc_id WHERE p.pid IN ({marks})",
                [int(p) for p in pids],
            )
            cut = self._sliced_in_python({r[0]: (r[3], r[4]) for r in rows if len(r[5]) != r[4] - r[3]})
            docs = self._select_in(
                "SELECT doc_id, title, metadata FROM documents WHERE doc_id IN ({marks})", list({r[1] for r in rows})
            )
            found = {r[0] for r in rows}
            gone = [int(p) for p in pids if int(p) not in found]
            # Replaced since the published index was built (an upsert or a patch whose commit has not published
            # yet): the hit shows the document as the index ranked it. A deleted document is not shown.
            old = (
                self._select_in(
                    "SELECT r.pid, r.doc_id, r.idx, r.start, r.end, r.title, r.text, r.metadata "
                    "FROM replaced_passages r WHERE r.pid IN ({marks}) "
                    "AND EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = r.doc_id)",
                    gone,
                )
                if gone
                else []
            )
        of_doc = {doc_id: (title, json.loads(meta)) for doc_id, title, meta in docs}
        out = {
            pid: PassageHit(pid, doc_id, idx, start, end, of_doc[doc_id][0], cut.get(pid, text), of_doc[doc_id][1])
            for pid, doc_id, idx, start, end, text in rows
        }
        metadata: dict[str, Any] = {}  # the passages of one old version share one dict, as the current ones do
        for pid, doc_id, idx, start, end, title, text, meta in old:
            md = metadata.setdefault(meta, json.loads(meta))
            out[pid] = PassageHit(pid, doc_id, idx, start, end, title, text, md)
        return out

    def _sliced_in_python(self, spans: dict[int, tuple[int, int]]) -> dict[int, str]:
        """The text of these passages {pid: (start, end)} sliced from their documents' whole text. For the rare
        passage whose SQL slice came back short: SQLite's substr stops at a NUL character (JSON text may hold
        one), where Python's character offsets count it. Call it inside the read that found them."""
        if not spans:
            return {}
        rows = self._select_in(
            "SELECT p.pid, d.text FROM passages p JOIN documents d ON d.doc_id = p.doc_id WHERE p.pid IN ({marks})",
            list(spans),
        )
        return {pid: text[spans[pid][0] : spans[pid][1]] for pid, text in rows}

    def iter_passages(self, batch_size: int = 4096) -> Iterator[tuple[np.ndarray, list[str], np.ndarray]]:
        """Every passage in pid order, in batches: (pids (n,), title + passage texts, embeddings (n, d))."""
        for pids, _, texts, emb in self.iter_passages_after(-1, batch_size):
            yield pids, texts, emb

    def iter_passages_after(
        self, after: int, batch_size: int = 4096
    ) -> Iterator[tuple[np.ndarray, np.ndarray, list[str], np.ndarray]]:
        """Passages with ids above `after`, in pid order, in batches: (pids (n,), document numbers (n,),
        title + passage texts, embeddings (n, d))."""
        for b in self.batches_after(after, batch_size):
            yield b.pids, b.docs, b.texts, b.embeddings

    def batches_after(self, after: int, batch_size: int = 4096) -> Iterator[PassageBatch]:
        """Passages with ids above `after`, in pid order, in batches, with their documents' metadata."""
        last = after
        while True:
            with self._snapshot() as conn:
                rows = conn.execute(
                    f"SELECT p.pid, d.rowid, d.title, {_PASSAGE_SLICE}, p.embedding, d.metadata, p.start, p.end "
                    "FROM passages p JOIN documents d ON d.doc_id = p.doc_id WHERE p.pid > ? ORDER BY p.pid LIMIT ?",
                    (last, batch_size),
                ).fetchall()
                cut = self._sliced_in_python({r[0]: (r[6], r[7]) for r in rows if len(r[3]) != r[7] - r[6]})
            if not rows:
                return
            pids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            docs = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
            texts = [passage_text(r[2], cut.get(r[0], r[3])) for r in rows]
            emb = np.stack([np.frombuffer(r[4], dtype=np.float32) for r in rows])  # (n, d)
            yield PassageBatch(pids, docs, texts, emb, [r[5] for r in rows])
            last = int(pids[-1])
