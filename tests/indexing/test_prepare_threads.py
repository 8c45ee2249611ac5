"""Chunking documents while the same embedder encodes queries on another thread (a write beside searches, a
reindex beside searches): no query batch comes out ragged."""

from __future__ import annotations

import threading
from pathlib import Path

from indexing.chunking import ChunkingParams
from indexing.prepare import chunk_and_embed
from models import EmbedderCache


def test_chunking_beside_query_encoding(tiny_embedder_dir: Path) -> None:
    embedder = EmbedderCache().get(str(tiny_embedder_dir))
    docs = [{"id": f"d{i}", "text": "tides and the moon " * (50 + i)} for i in range(4)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def queries() -> None:
        while not stop.is_set():
            try:
                vectors = embedder.encode_queries(["moon", "a longer query about the tides and the moon"])
                assert vectors.shape == (2, embedder.dim)
            except BaseException as exc:  # noqa: BLE001 - any failure of the encoder is what this test looks for
                errors.append(exc)

    thread = threading.Thread(target=queries)
    thread.start()
    try:
        for _ in range(40):
            chunk_and_embed(docs, chunking=ChunkingParams(max_tokens=32, overlap=8), embedder=embedder)
    finally:
        stop.set()
        thread.join()
    assert errors == []
