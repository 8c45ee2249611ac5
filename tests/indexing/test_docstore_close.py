"""Closing a doc store (its collection deleted) while another thread reads through it: no crash."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from indexing.docstore import DocStore, StoredDocument


def _docs(n: int) -> list[StoredDocument]:
    return [
        StoredDocument(
            doc_id=f"d{i}",
            title="",
            text=f"text {i}",
            metadata={},
            content_hash=str(i),
            spans=[(0, 6)],
            embeddings=np.ones((1, 4), dtype=np.float32),
            context_id="",
        )
        for i in range(n)
    ]


def test_close_leaves_a_read_in_another_thread_to_finish(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "docs.sqlite3")
    store.upsert(_docs(500))
    started, closed = threading.Event(), threading.Event()
    seen: list[int] = []

    def reader() -> None:
        cursor = store._conn().execute("SELECT doc_id FROM documents ORDER BY rowid")
        seen.append(len(cursor.fetchmany(10)))
        started.set()
        closed.wait(10)
        seen.append(len(cursor.fetchall()))  # the connection it reads through was not closed under it

    thread = threading.Thread(target=reader)
    thread.start()
    assert started.wait(10)
    store.close()
    closed.set()
    thread.join(10)
    assert seen == [10, 490]
    assert store.document_ids()[:2] == ["d0", "d1"]  # and the store, asked again, opens a new connection
