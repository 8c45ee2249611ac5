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


def test_a_character_nfkc_spreads_over_several_matching_words_is_one_span() -> None:
    # U+FDFA is one character that NFKC makes four Arabic words: each matches, each maps back to that character.
    text = "\ufdfa ligature arabic \ufdfd some words here to pad the text out \ufdfa"
    terms = frozenset(tokenize(["\ufdfa \ufdfd"], normalize="nfkc")[0])
    assert len(terms) == 4
    assert term_spans(text, terms, normalize="nfkc") == [(0, 1), (56, 57)]
    both = frozenset(tokenize(["\ufdfa arabic"], normalize="nfkc")[0])
    assert term_spans(text, both, normalize="nfkc") == [(0, 1), (11, 17), (56, 57)]


NFKC_WORDS = [*WORDS, "\ufdfa", "\ufb01ne", "\u2474", "\u2488\u2489", "\u33cd", "cafe\u0301", "\uff21\uff22\uff23"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(NFKC_WORDS), st.sampled_from(GLUE)), min_size=1, max_size=12),
    st.lists(st.sampled_from(NFKC_WORDS), min_size=1, max_size=3),
)
def test_nfkc_spans_are_sorted_and_none_overlaps(parts: list[tuple[str, str]], query: list[str]) -> None:
    text = "".join(w + g for w, g in parts)
    terms = frozenset(tokenize([" ".join(query)], normalize="nfkc")[0])
    spans = term_spans(text, terms, normalize="nfkc")
    ends, starts = [e for _, e in spans[:-1]], [s for s, _ in spans[1:]]
    assert all(e <= s for e, s in zip(ends, starts, strict=True)), (text, spans)
    assert all(0 <= s < e <= len(text) for s, e in spans)
