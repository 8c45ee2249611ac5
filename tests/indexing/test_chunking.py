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
