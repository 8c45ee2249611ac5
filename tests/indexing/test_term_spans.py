"""`term_spans` (highlighting) finds exactly the words `tokenize` (BM25) matched: as many spans as the text has
tokens among the query's, each span a word of the text itself, context-dependent lowercasing included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from indexing.bm25 import term_spans, tokenize

WORDS = ["ΟΔΟΣ", "οδος", "οδοσ", "Moon", "moons", "TIDES", "tidal", "the", "İstanbul", "straße", "x86_64", "東京"]
GLUE = [" ", ".", "'", ":", "-", ", ", "\n", ""]


def _check(text: str, query: str) -> None:
    terms = frozenset(tokenize([query])[0])
    spans = term_spans(text, terms)
    assert len(spans) == sum(t in terms for t in tokenize([text])[0]), (text, query, spans)
    ends = [0] + [e for _, e in spans]
    for (s, e), before in zip(spans, ends, strict=False):  # words of the text, in order, none overlapping
        assert before <= s < e <= len(text) and text[s:e].strip() == text[s:e]


def test_a_capital_sigma_lowercases_as_bm25_lowercases_it() -> None:
    assert term_spans("İstanbul ΟΔΟΣ", frozenset(tokenize(["οδος"])[0])) == [(9, 13)]  # İ lowercases to 2 chars
    assert term_spans("ΟΔΟΣ.ΑΘΗΝΩΝ", frozenset(tokenize(["οδοσ"])[0])) == [(0, 4)]
    text = "ΟΔΟΣ'Α and ΟΔΟΣ here, οδος and οδοσ."
    assert term_spans(text, frozenset(tokenize(["ΟΔΟΣ"])[0])) == [(11, 15), (22, 26)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(GLUE)), min_size=1, max_size=12), st.sampled_from(WORDS)
)
def test_spans_count_the_tokens_bm25_matched(parts: list[tuple[str, str]], query: str) -> None:
    _check("".join(w + g for w, g in parts), query)
