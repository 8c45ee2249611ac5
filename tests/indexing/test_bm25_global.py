"""BM25 indexed per shard with corpus-wide statistics scores exactly as one index over the whole corpus."""

from __future__ import annotations

import numpy as np
import pytest

from indexing.bm25 import BM25Index, BM25Params, TokenIdCorpus, tokenize
from indexing.bm25_global import CorpusStats

TEXTS = [
    "Tides are caused by the gravity of the moon and the sun.",
    "The moon orbits the earth; its gravity pulls the oceans.",
    "Photosynthesis turns light, water and carbon dioxide into sugar.",
    "Plants use light energy; chlorophyll absorbs red and blue light.",
    "Volcanoes erupt when magma rises through the crust.",
    "Insulin regulates blood sugar; diabetes follows when it fails.",
    "The sun is a star; its light takes eight minutes to reach earth.",
    "Gravity waves and ocean tides are not the same thing at all.",
    "Sugar sugar sugar: a document that repeats one word many times over.",
    "the of and",  # stopwords only
] * 3
QUERIES = ["moon gravity tides", "light sugar plants", "sugar", "earth sun star", "unknownword"]


def _split(n_shards: int) -> list[list[int]]:
    return [[i for i in range(len(TEXTS)) if i % n_shards == s] for s in range(n_shards)]


@pytest.mark.parametrize("method", ["lucene", "okapi", "robertson", "atire"])
def test_shards_with_global_stats_score_like_one_index(method: str) -> None:
    params = BM25Params(method=method)
    tokens = tokenize(TEXTS)
    ids = np.arange(len(TEXTS)) * 10
    whole = BM25Index.build(tokens, ids, params)
    corpora = []
    for rows in _split(3):
        c = TokenIdCorpus()
        c.add([tokens[i] for i in rows])
        corpora.append(c)
    stats = CorpusStats.merge(CorpusStats.of(c) for c in corpora)
    assert (stats.n_docs, stats.total_len) == (len(tokens), sum(map(len, tokens)))
    shards = [BM25Index.build(c, ids[rows], params, stats=stats) for c, rows in zip(corpora, _split(3), strict=True)]
    q = tokenize(QUERIES)
    for qi, (want_ids, want_scores) in enumerate(whole.search(q, len(TEXTS))):
        got = {int(i): float(s) for shard in shards for i, s in zip(*shard.search(q, len(TEXTS))[qi], strict=True)}
        # Bit-identical: the same float operations as bm25s makes on the whole corpus.
        assert got == dict(zip(want_ids.tolist(), want_scores.tolist(), strict=True)), (method, QUERIES[qi])


def test_local_stats_differ_so_global_ones_are_needed() -> None:
    tokens = tokenize(TEXTS)
    rows = _split(3)[0]
    local = BM25Index.build([tokens[i] for i in rows], np.asarray(rows), BM25Params())
    whole = BM25Index.build(tokens, np.arange(len(TEXTS)), BM25Params())
    q = tokenize(["moon gravity"])
    local_scores = dict(zip(*(a.tolist() for a in local.search(q, 50)[0]), strict=True))
    whole_scores = dict(zip(*(a.tolist() for a in whole.search(q, 50)[0]), strict=True))
    assert any(abs(local_scores[i] - whole_scores[i]) > 1e-3 for i in local_scores)


def test_corpus_stats_count_documents_not_occurrences() -> None:
    c = TokenIdCorpus()
    c.add([["a", "a", "b"], ["b"], []])
    stats = CorpusStats.of(c)
    assert stats.df == {"a": 1, "b": 2}
    assert (stats.n_docs, stats.total_len) == (3, 4)
    assert CorpusStats.merge([stats, stats]).df == {"a": 2, "b": 4}
    assert stats.avg_len == np.float64(4 / 3)
