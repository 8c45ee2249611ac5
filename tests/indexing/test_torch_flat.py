"""The torch flat index answers as faiss.IndexFlatIP does (checked on the CPU; on a GPU host the same class
runs on CUDA, tests/gpu): rows, scores, the padding past the last row, empty inputs, blocks of queries."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from indexing import torch_flat
from indexing.torch_flat import MISSING_SCORE, TorchFlatIP, from_index


def _vectors(n: int, d: int = 24, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _faiss_flat(vectors: np.ndarray) -> faiss.IndexFlatIP:
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


@pytest.mark.parametrize(("n", "k"), [(500, 10), (500, 1), (7, 10), (0, 5)])
def test_matches_faiss_flat_ip(n: int, k: int) -> None:
    vecs, queries = _vectors(n), _vectors(33, seed=1)
    want_scores, want_rows = _faiss_flat(vecs).search(queries, k)
    scores, rows = TorchFlatIP(vecs, "cpu").search(queries, k)
    assert scores.dtype == np.float32 and rows.dtype == np.int64 and rows.shape == (33, k)
    np.testing.assert_array_equal(rows, want_rows)  # random vectors: no ties
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)
    assert (scores[:, n:] == MISSING_SCORE).all() and (rows[:, n:] == -1).all()


def test_no_queries() -> None:
    scores, rows = TorchFlatIP(_vectors(10), "cpu").search(np.zeros((0, 24), np.float32), 4)
    assert scores.shape == rows.shape == (0, 4)


def test_queries_in_blocks_give_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    vecs, queries = _vectors(300), _vectors(50, seed=2)
    whole = TorchFlatIP(vecs, "cpu").search(queries, 5)
    monkeypatch.setattr(torch_flat, "BLOCK_FLOATS", 300 * 7)  # 7 queries a product
    blocks = TorchFlatIP(vecs, "cpu").search(queries, 5)
    np.testing.assert_array_equal(blocks[1], whole[1])
    np.testing.assert_allclose(blocks[0], whole[0], rtol=1e-6, atol=1e-6)  # another GEMM blocking


def test_from_an_hnsw_index_takes_its_stored_vectors() -> None:
    vecs = _vectors(200)
    hnsw = faiss.IndexHNSWFlat(24, 8, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(vecs)
    flat = from_index(hnsw, "cpu")
    assert flat.ntotal == 200 and flat.d == 24
    np.testing.assert_array_equal(flat.search(vecs[:3], 1)[1][:, 0], [0, 1, 2])
    assert from_index(faiss.IndexFlatIP(24), "cpu").ntotal == 0
