"""The block of small segments: extended from the previous view's block, it holds exactly what a fresh copy
of the same segments would, and its postings score exactly like the segments' own."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from indexing.bm25 import BM25Params
from indexing.dense import DenseIndexParams
from indexing.live_segment import BlockData
from indexing.postings import Postings, TermStats, concat_postings, score_segments
from indexing.segment import Segment, SegmentBuilder

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]


def _segment(root: Path, rng: np.random.Generator, first_pid: int, rows: int) -> Segment:
    b = SegmentBuilder(rows=rows, dim=8, small_dim=4, dense=DenseIndexParams(kind="flat"))
    vecs = rng.standard_normal((rows, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    tokens = [list(rng.choice(WORDS, size=int(rng.integers(1, 6)))) for _ in range(rows)]
    pids = np.arange(first_pid, first_pid + rows, dtype=np.int64)
    b.add(pids, pids // 2, vecs, tokens, [f'{{"n": {p % 3}}}' for p in pids.tolist()])
    return Segment.load(root / b.finish(root))


def test_an_extended_block_equals_a_fresh_one(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    segs = [_segment(tmp_path, rng, 100 * i, int(rng.integers(1, 40))) for i in range(5)]
    grown = BlockData.build(segs[:3], None)
    grown = BlockData.build(segs, grown)  # the first three reused, two appended
    fresh = BlockData.build(segs, None)
    assert grown.names == fresh.names
    np.testing.assert_array_equal(grown.xb, fresh.xb)
    np.testing.assert_array_equal(grown.pids, fresh.pids)
    for name in ("indptr", "rows", "tf", "lengths"):
        np.testing.assert_array_equal(getattr(grown.postings, name), getattr(fresh.postings, name))
    assert grown.postings.terms == fresh.postings.terms
    other = BlockData.build([segs[1], segs[0]], grown)  # not a prefix: copied afresh
    np.testing.assert_array_equal(other.pids, np.concatenate([segs[1].pids, segs[0].pids]))


def test_block_postings_score_like_the_segments(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    segs = [_segment(tmp_path, rng, 100 * i, int(rng.integers(1, 40))) for i in range(4)]
    parts: list[Postings] = [s.postings for s in segs]
    block = concat_postings(parts)
    bases = np.cumsum([0] + [len(p) for p in parts[:-1]]).astype(np.int64)
    lengths = np.concatenate([p.lengths for p in parts]).astype(np.float64)
    df = {w: int(sum(p.live_df(None)[p.vocab[w]] for p in parts if w in p.vocab)) for w in WORDS}
    stats = TermStats(len(lengths), int(lengths.sum()), df)
    for method in ("lucene", "bm25l", "bm25+", "robertson"):
        params = BM25Params(method=method)
        for query in (["alpha", "beta"], ["theta", "theta", "eta"], ["nothing"]):
            a_rows, a_scores = score_segments(parts, bases, lengths, query, stats, params)
            b_rows, b_scores = block.score(query, stats, params)
            np.testing.assert_array_equal(a_rows, b_rows)
            np.testing.assert_array_equal(a_scores, b_scores)


def test_an_exact_scan_of_some_rows_is_brute_force_over_them() -> None:
    import faiss

    from indexing.live_segment import scan_rows

    rng = np.random.default_rng(3)
    xb = rng.standard_normal((500, 16)).astype(np.float32)
    flat = faiss.IndexFlatIP(16)
    flat.add(xb)
    q = rng.standard_normal((3, 16)).astype(np.float32)  # (nq, d)
    rows = np.sort(rng.choice(500, size=25, replace=False))
    scores, found = scan_rows(flat, q, rows, 10)
    for qi in range(3):
        s = xb[rows] @ q[qi]
        order = np.argsort(-s)[:10]
        np.testing.assert_array_equal(found[qi], rows[order])
        np.testing.assert_allclose(scores[qi], s[order], rtol=1e-5)
    _, few = scan_rows(flat, q[:1], rows[:4], 10)  # fewer rows than k: the rest are -1
    assert sorted(few[0][:4].tolist()) == rows[:4].tolist() and (few[0][4:] == -1).all()
