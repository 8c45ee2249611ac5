"""Segment postings score exactly as bm25s does (every variant, okapi included) over the same passages."""

from __future__ import annotations

import numpy as np
import pytest

from indexing.bm25 import METHODS, BM25Index, BM25Params, tokenize
from indexing.postings import Postings, TermStats, okapi_mean_idf

DOCS = [
    "the cat sat on the mat",
    "dogs are running in the park",
    "cats and dogs",
    "quantum physics of cats",
    "cat cat cat dog",
    "zebra",
]


@pytest.mark.parametrize("method", METHODS)
def test_postings_score_like_bm25s(method: str) -> None:
    tokens = tokenize(DOCS)
    params = BM25Params(method=method)
    ref = BM25Index.build(tokens, np.arange(len(DOCS)), params)
    p = Postings.build(tokens)
    for query in tokenize(["cat dog park", "quantum cats cats", "unknown words"]):
        df = p.live_df(None)
        stats = p.stats(set(query), None, df)
        if method == "okapi":
            stats = TermStats(stats.n_docs, stats.total_len, stats.df, okapi_mean_idf(stats.n_docs, df))
        rows, scores = p.score(query, stats, params)
        want = dict(zip(*(a.tolist() for a in ref.search([query], len(DOCS))[0]), strict=True))
        # bm25l and bm25+ give every passage a score; Vela returns only passages that share a query term.
        want = {r: s for r, s in want.items() if set(tokens[r]) & set(query)}
        got = {r: s for r, s in zip(rows.tolist(), scores.tolist(), strict=True) if s > 0}
        assert got.keys() == want.keys()
        assert all(abs(got[r] - want[r]) <= 1e-5 * max(1.0, abs(want[r])) for r in got)


def test_live_document_frequencies_skip_deleted_rows() -> None:
    p = Postings.build(tokenize(DOCS))
    live = np.array([True, False, True, True, False, False])
    df = dict(zip(p.terms, p.live_df(live).tolist(), strict=True))
    assert df["cat"] == 3 and df["dog"] == 1 and df["zebra"] == 0  # the last term's rows are all dead
    kept = np.flatnonzero(live)
    terms, term_of, row_of, tf = p.select(kept)
    merged = Postings.from_triples(terms, term_of, row_of, tf, np.asarray(p.lengths)[kept])
    assert dict(zip(merged.terms, merged.live_df(None).tolist(), strict=True))["cat"] == 3
