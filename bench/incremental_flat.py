"""Part 3 of `vela bench incremental`: one 50-document commit into a flat collection of 1M synthetic passages.

The collection's embedder is a tiny random BERT (1 layer, 32-d, MiniLM tokenizer) saved to a temporary folder.
Bulk rows are synthetic texts (8-24 words from a seeded 20,000-word vocabulary) with random unit vectors,
written straight into the doc store in batches (DocStore.upsert), then published by one commit: a single
flat segment. The timed step is then a job of 50 new documents through `indexing.ingest.run_job`, as a
worker runs it: chunk, embed with the tiny encoder, store, commit (one new segment), and load the new
view for searching (the store's background reader is on, so run_job's after_commit loads it). Then a BM25
search for the documents' marker checks they are found.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import random_bert_encoder

SEED = 0


def _vocabulary(rng: np.random.Generator, size: int = 20_000) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 10, size)
    return np.array(["".join(rng.choice(letters, n)) for n in lengths])


def _texts(rng: np.random.Generator, vocab: np.ndarray, n: int) -> list[str]:
    lengths = rng.integers(8, 25, n)
    words = vocab[rng.zipf(1.3, int(lengths.sum())) % len(vocab)]
    ends = np.cumsum(lengths)
    return [" ".join(words[e - k : e]) for e, k in zip(ends, lengths, strict=True)]


def tiny_encoder(root: Path) -> Path:
    """A random 1-layer, 32-wide BERT with the MiniLM tokenizer (as tests/tiny_models.py makes)."""
    return random_bert_encoder(root, hidden=32, heads=2, intermediate=64, max_positions=128, max_length=64)


def run_flat(passages: int, commit_docs: int, commits: int, embedder_dir: Path | None) -> dict[str, Any]:
    from indexing.collection import CollectionSettings
    from indexing.dense import DenseIndexParams
    from indexing.docstore import StoredDocument
    from indexing.ingest import run_job
    from indexing.jobs import JobKind, JobStatus, JobStore
    from indexing.merger import wait_background
    from indexing.prepare import content_hash
    from indexing.store import CollectionStore
    from models import EmbedderCache
    from service.search import search_batch

    tiny = embedder_dir is None
    with tempfile.TemporaryDirectory(prefix="vela-flat-") as tmp:
        if embedder_dir is None:
            embedder_dir = tiny_encoder(Path(tmp) / "tiny-embedder")
        embedders = EmbedderCache()
        embedder = embedders.get(str(embedder_dir))
        embedder.encode_documents(["warm up"])  # the model is loaded once per worker, not per job
        store = CollectionStore(Path(tmp) / "data")
        settings = CollectionSettings(
            name="flat", embedder=str(embedder_dir), dim=embedder.dim, dense_index=DenseIndexParams(kind="flat")
        )
        coll = store.create(settings)
        rng = np.random.default_rng(SEED)
        vocab = _vocabulary(rng)
        t0 = time.perf_counter()
        with coll.writer():
            for start in range(0, passages, 20_000):
                n = min(20_000, passages - start)
                vecs = rng.standard_normal((n, embedder.dim), dtype=np.float32)  # (n, d)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                batch = []
                for i, (text, vec) in enumerate(zip(_texts(rng, vocab, n), vecs, strict=True)):
                    doc_id = f"syn-{start + i}"
                    h = content_hash({"id": doc_id, "title": "", "text": text}, settings.chunking)
                    batch.append(StoredDocument(doc_id, "", text, {}, h, [(0, len(text))], vec[None]))
                coll.docstore.upsert(batch)
            store_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            coll.commit()
            commit_s = time.perf_counter() - t1
        t1 = time.perf_counter()
        store.start_reader()  # loads the published view now, and keeps searches on the newest one
        load_s = time.perf_counter() - t1
        jobs = JobStore(Path(tmp) / "data" / "jobs.sqlite3")
        timings, found, encode_only = [], [], []
        for c in range(commits):
            marker = f"flatmark{c:03d}"
            docs = [
                {"id": f"new-{c}-{j}", "title": marker, "text": " ".join(_texts(rng, vocab, 3))}
                for j in range(commit_docs)
            ]
            job = jobs.create(collection="flat", kind=JobKind.UPSERT, payload=docs)
            t1 = time.perf_counter()
            status = run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders)
            timings.append(time.perf_counter() - t1)
            assert status == JobStatus.SUCCEEDED, jobs.get(job.id)
            t1 = (
                time.perf_counter()
            )  # the same texts through the bare encoder: the part of a commit that is not the index
            embedder.encode_documents([f"{d['title']}\n{d['text']}" for d in docs])
            encode_only.append(time.perf_counter() - t1)
            (res,) = search_batch(collection=coll, embedder=None, queries=[marker], k=10, mode="bm25")
            found.append(any(h.id.startswith(f"new-{c}-") for h in res.hits))
        wait_background(600)
        stats = coll.stats()
        store.stop_reader()
        coll.close()
    return {
        "passages": passages,
        "embedder": "tiny random BERT (1 layer, 32-d, MiniLM tokenizer)" if tiny else str(embedder_dir),
        "bulk_rows": "synthetic texts, random unit vectors, DocStore.upsert in 20k batches, one commit",
        "build_s": {"docstore_upsert": round(store_s, 1), "commit": round(commit_s, 1), "view_load": round(load_s, 2)},
        "commit_docs": commit_docs,
        "commit_s": [round(t, 3) for t in timings],
        "first_commit_s": round(timings[0], 3),
        "bare_encoder_same_texts_s": [round(t, 3) for t in encode_only],
        "max_commit_s": round(max(timings), 3),
        "found_by_search": found,
        "segments_after": stats["index"]["segments"],
        "dense_kind": stats["index"]["dense"]["kind"],
        "target": "one 50-document commit <= 2 s",
    }
