"""A large real-text collection for the dense benchmarks: >= 100,000 passages from the shared BEIR corpora.

Passages are every window of 1 and of 2 consecutive sentences of each SciFact and Cranfield abstract (split
after . ! or ?), and of 1 and 2 consecutive non-empty lines of each CoSQA code snippet: 112,339 distinct texts
(duplicates dropped, the first kept), shuffled with a fixed seed, the first N kept. So the same N always gives
the same passages, and a smaller N is a prefix of a larger one. Queries are every query of the three sets.

Embeddings (the packaged all-MiniLM-L6-v2, torch) are cached under `.vela-bench/` at the repository root:
    large-<N>/passages.jsonl  {"id", "source", "text"} per passage, row order of the embeddings
    large-<N>/embeddings.npy  (N, 384) float32, unit length
    large-<N>/parts/          chunks encoded so far: a killed run resumes where it stopped
    queries/queries.jsonl + queries/embeddings.npy
`build_collection` turns the cache into a real Vela data directory (doc store + published snapshot) that
`vela serve --data-dir` can serve.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared/data/beir"
CACHE = REPO / ".vela-bench"
SOURCES = ("scifact", "cranfield", "cosqa-dev")
SEED = 0
CHUNK = 2048  # passages encoded (and saved) per part
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def all_passages(data: Path = DATA) -> list[dict[str, str]]:
    """Every distinct passage of the three corpora in a fixed shuffled order."""
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for source in SOURCES:
        code = source == "cosqa-dev"
        for doc in _read_jsonl(data / source / "corpus.jsonl"):
            pieces = doc["text"].split("\n") if code else SENTENCE_END.split(doc["text"])
            units = [u.strip() for u in pieces if u.strip()]
            for width in (1, 2):
                for i in range(len(units) - width + 1):
                    text = ("\n" if code else " ").join(units[i : i + width])
                    if text not in seen:
                        seen.add(text)
                        out.append({"id": f"{source}:{doc['_id']}:{i}+{width}", "source": source, "text": text})
    order = np.random.default_rng(SEED).permutation(len(out))
    return [out[i] for i in order]


def query_texts(data: Path = DATA) -> list[str]:
    return [q["text"] for source in SOURCES for q in _read_jsonl(data / source / "queries.jsonl")]


def _encode_resumable(texts: list[str], folder: Path, desc: str) -> np.ndarray:
    """Encode texts with the default embedder in parts saved as they finish; returns (len(texts), d)."""
    from tqdm import tqdm

    from models import EmbedderCache

    parts = folder / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    # Longest first across the whole set, so every batch pads to similar lengths.
    order = np.argsort([-len(t) for t in texts], kind="stable")  # (n,)
    starts = range(0, len(texts), CHUNK)
    embedder = EmbedderCache().get("default")
    with tqdm(total=len(texts), desc=desc, unit="passage") as bar:
        for part, start in enumerate(starts):
            path = parts / f"{part:05d}.npy"
            if not path.exists():
                rows = order[start : start + CHUNK]
                vecs = embedder.encode_documents([texts[i] for i in rows], batch_size=64)  # (chunk, d)
                np.save(path.with_suffix(".tmp.npy"), vecs)
                path.with_suffix(".tmp.npy").replace(path)
            bar.update(min(CHUNK, len(texts) - start))
    out = np.empty((len(texts), embedder.dim), np.float32)  # (n, d)
    for part, start in enumerate(starts):
        out[order[start : start + CHUNK]] = np.load(parts / f"{part:05d}.npy")
    return out


def _fingerprint(texts: list[str]) -> str:
    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()


def _load_cached(folder: Path, all_texts: list[str], n: int) -> np.ndarray | None:
    """The first n embeddings of a cache made from a prefix of all_texts at least n long, else None."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        emb = np.load(folder / "embeddings.npy", mmap_mode="r")  # (M, d)
    except (OSError, ValueError):
        return None
    count = int(meta.get("count", 0))
    if count < n or emb.shape[0] != count or meta.get("fingerprint") != _fingerprint(all_texts[:count]):
        return None
    return np.array(emb[:n], dtype=np.float32)  # (n, d)


def _save(folder: Path, texts: list[str], rows: list[dict[str, str]], emb: np.ndarray) -> None:
    with open(folder / "passages.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    np.save(folder / "embeddings.npy", emb)
    (folder / "meta.json").write_text(json.dumps({"count": len(texts), "fingerprint": _fingerprint(texts)}))
    shutil.rmtree(folder / "parts", ignore_errors=True)


def load_passages(passages: int = 100_000) -> tuple[list[dict[str, str]], np.ndarray]:
    """The first `passages` passages and their embeddings (N, d), encoding whatever is not cached yet."""
    rows = all_passages()
    if passages > len(rows):
        raise ValueError(f"the shared corpora give {len(rows)} passages, fewer than {passages}")
    all_texts = [r["text"] for r in rows]
    rows, texts = rows[:passages], all_texts[:passages]
    # Any cache of at least this many holds these passages as its prefix (same seed, same order).
    for folder in sorted(CACHE.glob("large-*")):
        emb = _load_cached(folder, all_texts, passages)
        if emb is not None:
            return rows, emb
    folder = CACHE / f"large-{passages}"
    emb = _encode_resumable(texts, folder, f"encoding {passages} passages")
    _save(folder, texts, rows, emb)
    return rows, emb


def load_queries() -> tuple[list[str], np.ndarray]:
    """Every query of the three sets and its query embedding (Q, d), encoded once and cached."""
    texts = query_texts()
    folder = CACHE / "queries"
    path = folder / "embeddings.npy"
    if path.exists() and json.loads((folder / "meta.json").read_text()).get("fingerprint") == _fingerprint(texts):
        return texts, np.load(path)
    from models import EmbedderCache

    folder.mkdir(parents=True, exist_ok=True)
    emb = EmbedderCache().get("default").encode_queries(texts)  # (Q, d)
    np.save(path, emb)
    (folder / "meta.json").write_text(json.dumps({"count": len(texts), "fingerprint": _fingerprint(texts)}))
    return texts, emb


def build_collection(data_dir: Path, *, passages: int = 100_000, name: str = "large", dense: Any = None) -> str:
    """A real collection of `passages` one-passage documents under data_dir, published; returns its name.

    Documents are stored with the cached embeddings (no encoding here) and the content hash the ingest
    path would give them, so `vela serve --data-dir data_dir` serves it as if it had been ingested.
    Every passage but a handful fits one 224-token window, so each document holds the one passage ingest
    would have made of it. `dense` (DenseIndexParams) sets the index kind; the default "auto" builds HNSW
    from 100,000 passages.
    """
    from indexing.collection import CollectionSettings
    from indexing.dense import DenseIndexParams
    from indexing.docstore import StoredDocument
    from indexing.prepare import content_hash
    from indexing.store import CollectionStore
    from models import resolve_model_dir

    rows, emb = load_passages(passages)
    store = CollectionStore(data_dir)
    dense = dense or DenseIndexParams()
    if store.exists(name):
        coll = store.get(name)
        if coll.docstore.counts() == (passages, passages) and coll.settings.dense_index == dense:
            return name
        store.delete(name)
    settings = CollectionSettings(
        name=name,
        embedder=str(resolve_model_dir("default")),
        dim=int(emb.shape[1]),
        dense_index=dense,
    )
    coll = store.create(settings)
    with coll.writer():
        for start in range(0, passages, 4096):
            batch = []
            for r, vec in zip(rows[start : start + 4096], emb[start : start + 4096], strict=True):
                meta = {"source": r["source"]}
                doc = {"id": r["id"], "title": "", "text": r["text"], "metadata": meta}
                h = content_hash(doc, settings.chunking)  # what ingest compares to skip unchanged documents
                batch.append(StoredDocument(r["id"], "", r["text"], meta, h, [(0, len(r["text"]))], vec[None]))
            coll.docstore.upsert(batch)
        coll.commit()
    return name
