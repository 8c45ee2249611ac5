"""Dense scores do not depend on how many rows the index holds: a shard scores as the whole collection."""

from __future__ import annotations

import faiss
import numpy as np

from indexing.dense import rescore, search
from models.embedder.modeling_embedder import truncate_embeddings


def unit(x: np.ndarray) -> np.ndarray:
    return truncate_embeddings(x, x.shape[-1])  # unit rows, as the serving core normalises


def test_rescored_scores_are_bit_identical_across_index_sizes() -> None:
    rng = np.random.default_rng(0)
    vecs = unit(rng.normal(size=(3000, 64)).astype(np.float32))  # (N, d)
    queries = unit(rng.normal(size=(16, 64)).astype(np.float32))  # (nq, d)
    whole, part = faiss.IndexFlatIP(64), faiss.IndexFlatIP(64)
    whole.add(vecs)
    part.add(vecs[::3])  # a "shard": every third row
    raw_whole, rows_whole = search(whole, queries, 3000)
    _, rows_part = search(part, queries, 1000)
    rows_whole, exact_whole = rescore(whole, rows_whole, queries, 3000)
    rows_part, exact_part = rescore(part, rows_part, queries, 1000)
    for q in range(len(queries)):
        w = dict(zip(rows_whole[q].tolist(), exact_whole[q].tolist(), strict=True))
        p = dict(zip((rows_part[q] * 3).tolist(), exact_part[q].tolist(), strict=True))
        assert all(w[r] == s for r, s in p.items())  # bit for bit
        # The raw BLAS scores agree only to rounding; this is what the rescoring is for.
        raw_w = dict(zip(search(whole, queries, 3000)[1][q].tolist(), raw_whole[q].tolist(), strict=True))
        assert max(abs(raw_w[r] - s) for r, s in p.items()) < 1e-5
