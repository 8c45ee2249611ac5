"""A collection's shortest BM25 term: 2 characters by default (bm25s's pattern), 1 on request (single letters and
digits are terms, as in Lucene's standard analyzer)."""

from __future__ import annotations

import pytest

from indexing.bm25 import BM25Params, term_spans, tokenize


def test_single_letters_and_digits_are_terms_only_when_asked() -> None:
    assert tokenize(["Vitamin D and type 2 diabetes"]) == [["vitamin", "type", "diabet"]]
    assert tokenize(["Vitamin D and type 2 diabetes"], min_chars=1) == [["vitamin", "d", "type", "2", "diabet"]]
    assert tokenize(["a"], min_chars=1) == [[]]  # still a stopword
    assert term_spans("Vitamin D", frozenset({"d"})) == []
    assert term_spans("Vitamin D", frozenset({"d"}), 1) == [(8, 9)]


def test_the_setting_is_checked_and_older_collections_read_as_two() -> None:
    assert BM25Params.from_json({"method": "lucene", "k1": 1.2, "b": 0.75}).min_token_chars == 2
    assert BM25Params.from_json(BM25Params(min_token_chars=1).to_json()).min_token_chars == 1
    for bad in (0, 3):
        with pytest.raises(ValueError, match="min_token_chars must be 1 or 2"):
            BM25Params(min_token_chars=bad)
