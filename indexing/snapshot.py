"""Versioned, crash-safe index snapshots of one collection: FAISS (full + Matryoshka prefix) and BM25.

Layout under `<collection>/index/`:
    CURRENT                      {"version": N}; replaced atomically, so readers see one whole snapshot
    v000N/manifest.json          what the snapshot holds: docstore seq, counts, dims, params, file sizes
    v000N/dense-full.faiss       flat or HNSW index over unit vectors (row i is passage dense.ids.npy[i])
    v000N/dense-small.faiss      fp16 index over the re-normalised first `small_dim` dims (see indexing/dense.py)
    v000N/dense.ids.npy          int64 passage ids, row order of both FAISS files
    v000N/bm25/                  bm25s arrays + JSON (see indexing/bm25.py), with its own ids.npy

A snapshot is written into a temporary folder, fsynced, renamed to its version, and only then named in
CURRENT: a crash at any point leaves the previous snapshot in force.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from indexing.bm25 import BM25Index, BM25Params, TokenIdCorpus, tokenize
from indexing.bm25_global import CorpusStats
from indexing.dense import DenseIndexParams, new_indexes, rescore, search, set_ef_search
from indexing.docstore import DocStore
from models.cde.context import CorpusContext
from models.embedder.modeling_embedder import truncate_embeddings

MANIFEST = "manifest.json"
CURRENT = "CURRENT"
KEEP_VERSIONS = 2  # the current snapshot and the one before it (a reader may still be loading it)
# FAISS scans query by query (no BLAS) below this many queries per call; batched searches from
# /search/batch and the micro-batcher should always take the BLAS path (measured: 100k x 384 flat,
# 16 queries: 24.0 ms with the default 20, 21.3 ms with 1; one query: the same either way).
faiss.cvar.distance_compute_blas_threshold = 1


class SnapshotError(RuntimeError):
    """A snapshot is missing, truncated or inconsistent: rebuild it from the doc store."""


@dataclass
class IndexSnapshot:
    version: int
    manifest: dict[str, Any]
    dense_full: faiss.Index  # IndexFlatIP or IndexHNSWFlat (manifest["dense_index"]["kind"])
    dense_small: faiss.Index  # prefix index: IndexScalarQuantizer or IndexHNSWSQ (IndexFlatIP before those)
    dense_ids: np.ndarray  # (N,) int64 passage ids
    bm25: BM25Index
    # CDE collections: the corpus context every vector of this snapshot was encoded with (None otherwise).
    context: CorpusContext | None = None

    @property
    def seq(self) -> int:
        return int(self.manifest["seq"])

    @property
    def passages(self) -> int:
        return int(self.dense_ids.shape[0])

    @property
    def small_dim(self) -> int:
        return int(self.manifest["small_dim"])

    @property
    def dense_kind(self) -> str:
        """ "flat" or "hnsw"; snapshots written before HNSW existed are flat."""
        return str(self.manifest.get("dense_index", {}).get("kind", "flat"))

    def search_dense(
        self, queries: np.ndarray, n: int, *, dim: str = "full", rescore_factor: int = 4
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Top-n passages per query by cosine: (passage ids, scores) each.

        dim="small" searches the Matryoshka prefix index for a shortlist of rescore_factor * n rows, then
        rescores that shortlist with the full vectors, so the final scores are full-dim cosines;
        rescore_factor=0 returns the prefix index's own ranking and cosines (to measure what it loses).
        """
        total = self.passages
        n = min(n, total)
        if n == 0:
            return [(np.empty(0, np.int64), np.empty(0, np.float32)) for _ in range(len(queries))]
        q = np.ascontiguousarray(queries, dtype=np.float32)  # (nq, d)
        if dim == "full":
            scores, rows = search(self.dense_full, q, n)  # (nq, n) each
            rows, scores = rescore(self.dense_full, rows, q, n)  # the same rows, scores independent of the index size
        else:
            shortlist = min(total, max(n * rescore_factor, n))
            scores, rows = search(self.dense_small, truncate_embeddings(q, self.small_dim), shortlist)  # (nq, S)
            if rescore_factor > 0:
                rows, scores = rescore(self.dense_full, rows, q, n)  # (nq, n) each
        # HNSW answers -1 where its search found fewer rows than asked: dropped.
        return [(self.dense_ids[r[r >= 0]], s[r >= 0]) for r, s in zip(rows, scores, strict=True)]

    def search_bm25(self, query_texts: list[str], n: int) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.bm25.search(tokenize(query_texts), n)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(Path(dirpath))


def _file_sizes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def current_version(index_dir: Path) -> int | None:
    try:
        return int(json.loads((index_dir / CURRENT).read_text())["version"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(f"unreadable {index_dir / CURRENT}: {exc}") from exc


def build_snapshot(
    index_dir: Path,
    docstore: DocStore,
    *,
    dim: int,
    small_dim: int,
    bm25_params: BM25Params,
    extra: dict[str, Any],
    dense: DenseIndexParams | None = None,
    context: CorpusContext | None = None,
    bm25_stats: CorpusStats | None = None,
) -> int:
    """Build every index from the doc store and publish it as the next version; returns the version.

    `bm25_stats`: the corpus-wide BM25 counts when this doc store is one shard of a collection."""
    index_dir.mkdir(parents=True, exist_ok=True)
    seq = docstore.seq()  # read first: the snapshot reflects at least this state
    small_dim = min(small_dim, dim)
    dense = dense or DenseIndexParams()
    # The kind is chosen before streaming: the caller holds the writer lock, so the count is the one built.
    kind = dense.choose(docstore.counts()[1])
    # Streamed from the doc store batch by batch: the only copies held are the indexes themselves (and
    # the token ids, 4 bytes a token), so memory grows with the index and not with the work around it.
    full_index, small_index = new_indexes(kind, dim, small_dim, dense)
    dense_s = 0.0  # time in FAISS adds alone (HNSW's graph building is most of a large build)
    corpus = TokenIdCorpus()
    pid_parts: list[np.ndarray] = []
    for pids, texts, emb in docstore.iter_passages():
        pid_parts.append(pids)
        t0 = time.perf_counter()
        full_index.add(emb)  # (n, d)
        small_index.add(truncate_embeddings(emb, small_dim))  # (n, small_dim)
        dense_s += time.perf_counter() - t0
        corpus.add(tokenize(texts))
    ids = np.concatenate(pid_parts) if pid_parts else np.empty(0, np.int64)
    dense_info = {
        "kind": kind,
        "full": type(full_index).__name__,
        "small": f"{type(small_index).__name__}(fp16)",
        "params": dense.to_json(),
        "build_s": round(dense_s, 3),
    }

    tmp = index_dir / f"tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        faiss.write_index(full_index, str(tmp / "dense-full.faiss"))
        faiss.write_index(small_index, str(tmp / "dense-small.faiss"))
        del full_index, small_index  # freed before BM25 builds its matrix
        np.save(tmp / "dense.ids.npy", ids)
        (tmp / "bm25").mkdir()
        BM25Index.build(corpus, ids, bm25_params, stats=bm25_stats).save(tmp / "bm25")
        if context is not None:
            context.save(tmp / "context")  # queries on this snapshot are encoded with exactly this context
        version = (current_version(index_dir) or 0) + 1
        manifest = {
            "version": version,
            "seq": seq,
            "passages": int(ids.shape[0]),
            "dim": dim,
            "small_dim": small_dim,
            "dense_index": dense_info,
            "bm25": bm25_params.to_json(),
            "created_at": time.time(),
            "files": _file_sizes(tmp),
            "context": context.id if context is not None else None,
            "bm25_global_stats": bm25_stats.summary() if bm25_stats is not None else None,
            **extra,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        _fsync_tree(tmp)
        final = index_dir / f"v{version:06d}"
        if final.exists():  # left by a crash between rename and CURRENT: never published, safe to drop
            shutil.rmtree(final)
        os.replace(tmp, final)
        write_atomic(index_dir / CURRENT, json.dumps({"version": version}).encode())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(index_dir, version)
    return version


def _prune(index_dir: Path, version: int) -> None:
    for p in index_dir.iterdir():
        stale = p.name[1:].isdigit() and int(p.name[1:]) <= version - KEEP_VERSIONS
        if p.name.startswith("tmp-") or (p.name.startswith("v") and stale):
            shutil.rmtree(p, ignore_errors=True)


def load_snapshot(index_dir: Path, version: int) -> IndexSnapshot:
    """Load and verify a snapshot; raises SnapshotError when anything is missing or truncated."""
    root = index_dir / f"v{version:06d}"
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        sizes = _file_sizes(root)
        sizes.pop(MANIFEST, None)
        if sizes != manifest["files"]:
            raise SnapshotError(f"{root}: files differ from the manifest (truncated or missing)")
        full = faiss.read_index(str(root / "dense-full.faiss"))
        small = faiss.read_index(str(root / "dense-small.faiss"))
        ids = np.load(root / "dense.ids.npy", allow_pickle=False)
        bm25 = BM25Index.load(root / "bm25", mmap=True)
        context = CorpusContext.load(root / "context") if manifest.get("context") else None
        ef_search = manifest.get("dense_index", {}).get("params", {}).get("ef_search")
        if ef_search is not None:
            set_ef_search(full, int(ef_search))
            set_ef_search(small, int(ef_search))
    except SnapshotError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise SnapshotError(f"{root}: {exc}") from exc
    n = int(manifest["passages"])
    if not (full.ntotal == small.ntotal == ids.shape[0] == len(bm25) == n):
        raise SnapshotError(f"{root}: index sizes disagree with the manifest ({n} passages)")
    return IndexSnapshot(version, manifest, full, small, ids, bm25, context)
