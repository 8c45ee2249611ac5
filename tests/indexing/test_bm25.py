"""BM25: file round trip, validation, and the okapi variant against rank_bm25 itself on SciFact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from indexing.bm25 import BM25Index, BM25Params, TokenIdCorpus, tokenize

DOCS = ["the cat sat on the mat", "dogs are running in the park", "cats and dogs", "quantum physics of cats"]


def test_tokenize_stems_and_drops_stopwords() -> None:
    assert tokenize(["The Cats are RUNNING, a b"]) == [["cat", "run"]]


def test_round_trip_and_truncated_files(tmp_path: Path) -> None:
    idx = BM25Index.build(tokenize(DOCS), np.arange(10, 14), BM25Params())
    idx.save(tmp_path)
    assert not list(tmp_path.glob("*.pkl")) and (tmp_path / "ids.npy").exists()
    loaded = BM25Index.load(tmp_path, mmap=True)
    queries = tokenize(["cat", "dog park", "zzz unknown"])
    for (a_ids, a_s), (b_ids, b_s) in zip(idx.search(queries, 10), loaded.search(queries, 10), strict=True):
        assert np.array_equal(a_ids, b_ids) and np.allclose(a_s, b_s)
    first, _, third = loaded.search(queries, 10)
    assert first[0].tolist() == [12, 13, 10]  # the short 'cats and dogs' first
    assert third[0].size == 0  # only unknown tokens: nothing matches
    data = tmp_path / "data.csc.index.npy"
    with open(data, "r+b") as f:
        f.truncate(data.stat().st_size - 8)
    with pytest.raises((ValueError, OSError)):
        BM25Index.load(tmp_path, mmap=True)


def test_empty_index_and_large_k(tmp_path: Path) -> None:
    empty = BM25Index.build([], np.empty(0, np.int64), BM25Params())
    empty.save(tmp_path)
    assert BM25Index.load(tmp_path).search([["cat"]], 5)[0][0].size == 0
    idx = BM25Index.build(tokenize(DOCS), np.arange(4), BM25Params())
    assert len(idx.search(tokenize(["cat"]), 1000)[0][0]) == 3


@pytest.mark.parametrize("method", ["lucene", "okapi", "bm25+"])
def test_stopword_only_passages_build_an_index_that_matches_nothing(tmp_path: Path, method: str) -> None:
    idx = BM25Index.build(tokenize(["the a", "of the"]), np.arange(2), BM25Params(method=method))
    idx.save(tmp_path)
    assert BM25Index.load(tmp_path).search(tokenize(["the cat"]), 5)[0][0].size == 0


def test_token_id_corpus_grown_in_batches_scores_like_one_list() -> None:
    corpus = TokenIdCorpus()
    corpus.add(tokenize(DOCS[:1]))
    corpus.add(tokenize(DOCS[1:]))
    assert len(corpus) == 4 and corpus[2] == [corpus.vocab["cat"], corpus.vocab["dog"]]
    queries = tokenize(["cat", "dog park"])
    batched = BM25Index.build(corpus, np.arange(4), BM25Params()).search(queries, 4)
    whole = BM25Index.build(tokenize(DOCS), np.arange(4), BM25Params()).search(queries, 4)
    for (a_ids, a_s), (b_ids, b_s) in zip(batched, whole, strict=True):
        assert np.array_equal(a_ids, b_ids) and np.allclose(a_s, b_s)


def test_params_are_validated() -> None:
    with pytest.raises(ValueError, match="method"):
        BM25Params(method="tfidf")
    with pytest.raises(ValueError, match="k1"):
        BM25Params(k1=-1)
    with pytest.raises(ValueError, match="b must"):
        BM25Params(b=1.5)
    assert BM25Params.from_json(BM25Params(method="okapi").to_json()).method == "okapi"


@pytest.mark.slow  # `make test-slow`: the default suite keeps under 15 minutes
def test_okapi_reproduces_rank_bm25_on_scifact(beir_dir: Path) -> None:
    root = beir_dir / "scifact"
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").read_text().splitlines()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (root / "queries.jsonl").read_text().splitlines())}
    test_qids = list(dict.fromkeys(r.split("\t")[0] for r in (root / "qrels/test.tsv").read_text().splitlines()[1:]))
    corpus_tokens = tokenize([f"{d['title']} {d['text']}" for d in corpus])
    query_tokens = tokenize([queries[q] for q in test_qids])
    assert len(query_tokens) == 300

    reference = BM25Okapi(corpus_tokens, k1=1.5, b=0.75, epsilon=0.25)
    ours = BM25Index.build(corpus_tokens, np.arange(len(corpus)), BM25Params(method="okapi", k1=1.5, b=0.75))
    results = ours.search(query_tokens, 10)
    for q, (ids, scores) in zip(query_tokens, results, strict=True):
        ref = reference.get_scores(q)
        ref_top = np.argsort(-ref, kind="stable")[:10]
        ref_top = ref_top[ref[ref_top] > 0]
        assert np.allclose(scores, ref[ids], rtol=1e-5)  # same scores for what we return
        assert set(ids.tolist()) == set(ref_top.tolist()) or np.isclose(ref[ref_top[-1]], ref[ids[-1]], rtol=1e-6)
        # Order agrees wherever the reference scores are not tied.
        for a, b in zip(ids, ids[1:], strict=False):
            assert ref[a] >= ref[b] - 1e-6 * abs(ref[a])


def test_nfkc_makes_one_term_of_one_text_written_two_ways_and_stored_params_keep_none() -> None:
    from indexing.bm25 import BM25Params, term_spans, tokenize

    same = [("caf\u00e9 au lait", "cafe\u0301 au lait"), ("\ufb01nance", "finance"), ("\uff21\uff22\uff23", "ABC")]
    for a, b in same:
        assert tokenize([a], normalize="nfkc") == tokenize([b], normalize="nfkc"), (a, b)
        assert tokenize([a]) != tokenize([b])  # "none", as collections made before the setting
    assert BM25Params.from_json({"method": "lucene", "k1": 1.2, "b": 0.75}).normalize == "none"
    text = "A cafe\u0301, a \ufb01ne \uff21\uff22\uff23 day"
    terms = frozenset(t for q in tokenize(["caf\u00e9 fine abc"], normalize="nfkc") for t in q)
    spans = term_spans(text, terms, normalize="nfkc")
    assert [text[a:b] for a, b in spans] == ["cafe\u0301", "\ufb01ne", "\uff21\uff22\uff23"]
    assert term_spans("plain text", frozenset(tokenize(["text"])[0]), normalize="nfkc") == [(6, 10)]
