"""The dense (FAISS) indexes of a snapshot: which kind a collection gets, and how each is built batch by batch.

Full index (the ranking of `dim: "full"`, and the vectors every rescore reads):
    flat   IndexFlatIP: exact. Below `hnsw_threshold` passages a scan is cheap and builds cost nothing.
    hnsw   IndexHNSWFlat with METRIC_INNER_PRODUCT (vectors are unit length, so inner product = cosine):
           approximate, sublinear search; its storage still holds the full fp32 vectors for rescoring.
Small index (the re-normalised Matryoshka prefix; it only makes a shortlist that the full vectors rescore,
so it may be lossy):
    flat   IndexScalarQuantizer fp16 over the prefix: a single-query scan is bound by memory bandwidth, and
           fp16 x 256 dims reads a third of the bytes of fp32 x 384; fp16 needs no training, so it streams.
    hnsw   IndexHNSWSQ fp16 over the prefix, same graph parameters: the small path stays sublinear too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import faiss
import numpy as np

KINDS = ("auto", "flat", "hnsw")


@dataclass(frozen=True)
class DenseIndexParams:
    """How a collection's dense indexes are built: "auto" picks flat below hnsw_threshold passages."""

    kind: str = "auto"
    hnsw_threshold: int = 100_000  # passages; at or above it "auto" builds HNSW
    hnsw_m: int = 32  # graph neighbours per node (memory: about 2 * m * 4 bytes a passage at level 0)
    ef_construction: int = 200
    ef_search: int = 128  # candidate list of a search (raised to k where k is larger: see search)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"dense index kind must be one of {KINDS}, got {self.kind!r}")
        if self.hnsw_threshold < 0:
            raise ValueError(f"hnsw_threshold must be >= 0, got {self.hnsw_threshold}")
        if not 4 <= self.hnsw_m <= 256:
            raise ValueError(f"hnsw_m must be in [4, 256], got {self.hnsw_m}")
        if self.ef_construction < 1 or self.ef_search < 1:
            raise ValueError(
                f"ef_construction and ef_search must be >= 1, got {self.ef_construction}, {self.ef_search}"
            )

    def choose(self, passages: int) -> str:
        """The kind to build for a collection of this many passages: "flat" or "hnsw"."""
        if self.kind != "auto":
            return self.kind
        return "hnsw" if passages >= self.hnsw_threshold else "flat"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> DenseIndexParams:
        """Settings written before this class existed have no entry: they get the defaults."""
        return cls(**{k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__})


def new_indexes(kind: str, dim: int, small_dim: int, params: DenseIndexParams) -> tuple[faiss.Index, faiss.Index]:
    """Empty (full, small) indexes of one kind; both take vectors with `add` as they stream in."""
    ip = faiss.METRIC_INNER_PRODUCT
    fp16: Any = faiss.ScalarQuantizer.QT_fp16  # an int at run time; the stubs type it as the class
    if kind == "flat":
        return faiss.IndexFlatIP(dim), faiss.IndexScalarQuantizer(small_dim, fp16, ip)
    if kind != "hnsw":
        raise ValueError(f"cannot build a dense index of kind {kind!r}")
    full = faiss.IndexHNSWFlat(dim, params.hnsw_m, ip)
    small = faiss.IndexHNSWSQ(small_dim, fp16, params.hnsw_m, ip)
    for index in (full, small):
        index.hnsw.efConstruction = params.ef_construction
        index.hnsw.efSearch = params.ef_search
    return full, small


def set_ef_search(index: faiss.Index, ef_search: int) -> None:
    """Apply the collection's ef_search to a loaded index (a no-op on flat ones)."""
    hnsw = getattr(index, "hnsw", None)
    if hnsw is not None:
        hnsw.efSearch = ef_search


def search(index: faiss.Index, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows) of index.search, each (nq, k). HNSW gets a candidate list of at least k: faiss stops
    at efSearch results (-1 after), and a hybrid search asks for depth x rescore factor rows (800)."""
    hnsw = getattr(index, "hnsw", None)
    if hnsw is not None and k > hnsw.efSearch:
        return index.search(queries, k, params=faiss.SearchParametersHNSW(efSearch=k))  # type: ignore[attr-defined,no-any-return]
    return index.search(queries, k)  # type: ignore[no-any-return]


def rescore(full: faiss.Index, rows: np.ndarray, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank each query's shortlist rows by full-dim inner product: top-n (rows, scores), best first.

    rows may hold -1 (an HNSW search that found fewer than asked): those score -inf and come back as -1.
    """
    nq, s = rows.shape  # (nq, S)
    valid = rows >= 0
    vecs = full.reconstruct_batch(np.where(valid, rows, 0).ravel()).reshape(nq, s, -1)  # (nq, S, d)
    scores = exact_scores(vecs, queries)  # (nq, S)
    scores[~valid] = -np.inf
    # Stable, so equal full scores keep the shortlist's order (deterministic output).
    top = np.argsort(-scores, axis=1, kind="stable")[:, :n]  # (nq, n)
    top_rows = np.take_along_axis(rows, top, axis=1)  # (nq, n)
    top_scores = np.take_along_axis(scores, top, axis=1).astype(np.float32)  # (nq, n)
    return top_rows, top_scores


def exact_scores(vecs: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Inner products of each query with its rows, (nq, S, d) x (nq, d) -> (nq, S) float32, summed in float64.

    FAISS's scores come out of a BLAS product whose rounding depends on how many rows the index holds; these
    depend only on the two vectors, so a shard and the whole collection give bit-identical scores (and
    equal scores order alike, by passage id: see service/search.py)."""
    out = np.empty(vecs.shape[:2], dtype=np.float32)  # (nq, S)
    for i in range(vecs.shape[0]):  # one query at a time: the float64 copy stays one query's rows (S, d)
        out[i] = vecs[i].astype(np.float64) @ queries[i].astype(np.float64)  # (S,)
    return out
