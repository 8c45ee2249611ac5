"""An immutable segment: the indexes of a fixed set of passages, written once and never changed.

Layout of `<shard>/segments/<name>/`:
    segment.json        rows, dims, dense kind, file sizes (checked on load: a truncated file is refused)
    pids.npy            (n,) int64 passage ids, ascending: row i is passage pids[i]
    docs.npy            (n,) int64 document number of each row (the doc store's rowid): grouping by document
    dense-full.faiss    flat or HNSW over unit vectors (its storage keeps the fp32 vectors for rescoring)
    dense-small.faiss   fp16 index over the re-normalised Matryoshka prefix (see indexing/dense.py)
    bm25/               raw-tf postings (indexing/postings.py)
    metadata.jsonl      each row's document metadata (indexing/payload.py: filters, payload indexes)

Deletions never touch these files: the shard's manifest names a deletion bitmap per segment
(indexing/manifest.py), and searches skip dead rows inside FAISS (an IDSelector) and BM25 (a mask).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from indexing import gpu_index
from indexing.bm25 import TokenIdCorpus
from indexing.dense import DenseIndexParams, new_indexes, set_ef_search
from indexing.payload import FILE as PAYLOAD_FILE
from indexing.payload import Payload
from indexing.postings import Postings
from models.embedder.modeling_embedder import truncate_embeddings
from velaio.files import fsync_tree, load_npy

INFO = "segment.json"


class SegmentError(RuntimeError):
    """A segment file is missing or truncated."""


def _file_sizes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass
class Segment:
    name: str
    info: dict[str, Any]
    pids: np.ndarray  # (n,) int64 ascending
    docs: np.ndarray  # (n,) int64
    full: faiss.Index
    small: faiss.Index
    postings: Postings
    payload: Payload

    def __len__(self) -> int:
        return int(self.pids.shape[0])

    @property
    def kind(self) -> str:
        return str(self.info["dense"]["kind"])

    def rows_of(self, pids: np.ndarray) -> np.ndarray:
        """Rows of the given passage ids that this segment holds (ids it lacks are left out)."""
        pos = np.searchsorted(self.pids, pids)
        pos = np.minimum(pos, max(len(self) - 1, 0))
        return pos[self.pids[pos] == pids] if len(self) else np.empty(0, np.int64)

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), d) float32 full vectors, exactly as stored."""
        return self.full.reconstruct_batch(np.asarray(rows, dtype=np.int64))  # type: ignore[no-any-return]

    @classmethod
    def load(cls, root: Path, ef_search: int | None = None) -> Segment:
        try:
            info = json.loads((root / INFO).read_text())
            sizes = _file_sizes(root)
            sizes.pop(INFO, None)
            if sizes != info["files"]:
                raise SegmentError(f"{root}: files differ from {INFO} (truncated or missing)")
            if PAYLOAD_FILE not in sizes:
                raise SegmentError(f"{root}: written before segments kept metadata (rebuilt on open)")
            # On a GPU host above VELA_GPU_MIN_PASSAGES: searched on the GPU; the file stays the source of truth.
            full = gpu_index.place(faiss.read_index(str(root / "dense-full.faiss")))
            small = faiss.read_index(str(root / "dense-small.faiss"))
            pids = load_npy(root / "pids.npy")
            docs = load_npy(root / "docs.npy")
            postings = Postings.load(root / "bm25")
            payload = Payload.load(root)
        except SegmentError:
            raise
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise SegmentError(f"{root}: {exc}") from exc
        n = int(info["rows"])
        if not (full.ntotal == small.ntotal == pids.shape[0] == docs.shape[0] == len(postings) == len(payload) == n):
            raise SegmentError(f"{root}: index sizes disagree ({n} rows)")
        if ef_search is not None:
            set_ef_search(full, ef_search)
            set_ef_search(small, ef_search)
        return cls(root.name, info, pids, docs, full, small, postings, payload)


class SegmentBuilder:
    """Streams rows (sorted by passage id across calls) into a new segment; `finish` publishes it.

    Vectors go straight into FAISS and tokens into a compact id corpus (4 bytes a token), so a full rebuild
    of a large shard holds the indexes themselves and little else."""

    def __init__(self, *, rows: int, dim: int, small_dim: int, dense: DenseIndexParams) -> None:
        self.t0 = time.perf_counter()
        self.kind = dense.choose(rows)  # flat below the threshold, HNSW from it: per segment
        self.full, self.small = new_indexes(self.kind, dim, small_dim, dense)
        self.dim, self.small_dim = dim, small_dim
        self.corpus = TokenIdCorpus()
        self.pids: list[np.ndarray] = []
        self.docs: list[np.ndarray] = []
        self.metadata: list[str] = []  # each row's document metadata, JSON text

    def add(
        self,
        pids: np.ndarray,
        docs: np.ndarray,
        vectors: np.ndarray,
        tokens: list[list[str]] | None,
        metadata: Sequence[str],
    ) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)  # (n, d)
        if not len(pids):
            return
        self.full.add(vectors)
        self.small.add(truncate_embeddings(vectors, self.small_dim))  # (n, small_dim)
        self.pids.append(np.asarray(pids, dtype=np.int64))
        self.docs.append(np.asarray(docs, dtype=np.int64))
        if len(metadata) != len(pids):
            raise ValueError(f"{len(pids)} rows but {len(metadata)} metadata lines")
        self.metadata.extend(metadata)
        if tokens is not None:
            self.corpus.add(tokens)

    def finish(self, parent: Path, postings: Postings | None = None) -> str:
        """Write and publish the directory under `parent`; returns its name. Written into a temporary folder,
        fsynced and renamed: a crash leaves no half segment under a name a manifest could list (temporary
        folders are removed by the next commit's clean-up)."""
        pids = np.concatenate(self.pids) if self.pids else np.empty(0, np.int64)
        docs = np.concatenate(self.docs) if self.docs else np.empty(0, np.int64)
        if postings is None:
            postings = Postings.from_corpus(self.corpus)
        n = int(pids.shape[0])
        name = f"seg-{uuid.uuid4().hex[:16]}"
        tmp = parent / f"tmp-{name}"
        tmp.mkdir(parents=True)
        try:
            faiss.write_index(self.full, str(tmp / "dense-full.faiss"))
            faiss.write_index(self.small, str(tmp / "dense-small.faiss"))
            np.save(tmp / "pids.npy", pids, allow_pickle=False)
            np.save(tmp / "docs.npy", docs, allow_pickle=False)
            postings.save(tmp / "bm25")
            Payload.save(tmp, self.metadata)
            info = {
                "rows": n,
                "dim": self.dim,
                "small_dim": self.small_dim,
                "dense": {
                    "kind": self.kind,
                    "full": type(self.full).__name__,
                    "small": f"{type(self.small).__name__}(fp16)",
                },
                "min_pid": int(pids[0]) if n else None,
                "max_pid": int(pids[-1]) if n else None,
                "build_s": round(time.perf_counter() - self.t0, 3),
                "files": _file_sizes(tmp),
            }
            (tmp / INFO).write_text(json.dumps(info, indent=2))
            fsync_tree(tmp)
            os.replace(tmp, parent / name)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return name
