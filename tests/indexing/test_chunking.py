from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from indexing.chunking import ChunkingParams, chunk_text
from models.loading import packaged_minilm_dir


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    return AutoTokenizer.from_pretrained(packaged_minilm_dir(), local_files_only=True)


def test_short_text_is_one_passage(tokenizer) -> None:  # type: ignore[no-untyped-def]
    spans = chunk_text("A short text.", tokenizer, ChunkingParams())
    assert [(s.index, s.start, s.end) for s in spans] == [(0, 0, 13)]


def test_windows_overlap_and_cover_the_text(tokenizer) -> None:  # type: ignore[no-untyped-def]
    text = " ".join(f"word{i}" for i in range(300))
    params = ChunkingParams(max_tokens=50, overlap=10)
    spans = chunk_text(text, tokenizer, params)
    assert len(spans) > 3 and spans[0].start == 0 and spans[-1].end == len(text)
    for a, b in zip(spans, spans[1:], strict=False):
        assert b.start < a.end  # consecutive windows share text
        assert b.index == a.index + 1
    for s in spans:
        n = len(tokenizer(text[s.start : s.end], add_special_tokens=False)["input_ids"])
        assert n <= params.max_tokens + 2  # window edges fall on token boundaries


def test_params_are_validated() -> None:
    with pytest.raises(ValueError, match="overlap"):
        ChunkingParams(max_tokens=32, overlap=30)
    with pytest.raises(ValueError, match="max_tokens"):
        ChunkingParams(max_tokens=4)


WORDS = [
    "immunohistochemistry",
    "lapatinib",
    "cytokines",
    "a",
    "of",
    "pseudopseudohypoparathyroidism",
    "tyrosine-kinase",
    "cells.",
]


@pytest.mark.parametrize(("max_tokens", "overlap"), [(16, 0), (16, 4), (24, 8), (50, 10)])
def test_windows_start_and_end_on_word_boundaries(tokenizer, max_tokens: int, overlap: int) -> None:  # type: ignore[no-untyped-def]
    # WordPiece splits long words into several tokens: a window edge between two of them cut the word ("lap|atinib"),
    # and BM25 then indexed "atinib".
    text = " ".join(WORDS[(i * 7) % len(WORDS)] for i in range(400))
    spans = chunk_text(text, tokenizer, ChunkingParams(max_tokens=max_tokens, overlap=overlap))
    assert spans[0].start == 0 and spans[-1].end == len(text) and len(spans) > 5
    for s in spans:
        assert s.start == 0 or not (text[s.start - 1].isalnum() and text[s.start].isalnum()), text[
            s.start - 10 : s.start + 10
        ]
        assert s.end == len(text) or not (text[s.end - 1].isalnum() and text[s.end].isalnum()), text[
            s.end - 10 : s.end + 10
        ]
        n = len(tokenizer(text[s.start : s.end], add_special_tokens=False)["input_ids"])
        assert n <= max_tokens + 2
    for a, b in zip(spans, spans[1:], strict=False):  # every word is in some window: no gap between them
        assert b.start > a.start and not text[a.end : b.start].strip()  # at most the space between them


def test_a_word_longer_than_a_window_is_cut_where_it_must_be(tokenizer) -> None:  # type: ignore[no-untyped-def]
    text = "start " + "x" * 4000 + " end"
    spans = chunk_text(text, tokenizer, ChunkingParams(max_tokens=16, overlap=4))
    assert spans[-1].end == len(text) and all(b.start > a.start for a, b in zip(spans, spans[1:], strict=False))
