"""Split long documents into overlapping token windows that the embedder can read whole."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class ChunkingParams:
    max_tokens: int = 224  # content tokens per passage (title, prefix and special tokens come on top)
    overlap: int = 32  # tokens shared by consecutive windows, so no sentence is only ever seen cut

    def __post_init__(self) -> None:
        if self.max_tokens < 16:
            raise ValueError(f"chunk max_tokens must be >= 16, got {self.max_tokens}")
        if not 0 <= self.overlap < self.max_tokens // 2 + 1:
            raise ValueError(f"chunk overlap must be in [0, max_tokens/2], got {self.overlap}")


@dataclass(frozen=True)
class Span:
    """One passage of a document: its position and the character offsets of its text."""

    index: int
    start: int
    end: int


def chunk_text(text: str, tokenizer: PreTrainedTokenizerBase, params: ChunkingParams) -> list[Span]:
    """Token windows over `text`, returned as character spans (so passages quote the original text).

    A text that fits in one window gives one span covering it all; an empty text gives one empty span,
    so every document owns at least one passage (its title may still match).
    """
    if not text.strip():
        return [Span(0, 0, len(text))]
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    offsets: list[tuple[int, int]] = enc["offset_mapping"]
    n = len(offsets)
    if n <= params.max_tokens:
        return [Span(0, 0, len(text))]
    words = _word_ids(enc, n)
    stride = params.max_tokens - params.overlap
    spans: list[Span] = []
    first, previous = 0, -1
    while True:
        last = min(first + params.max_tokens, n) - 1
        # Windows start and end on word boundaries ("immunohisto|chemistry" would index a word BM25 never
        # sees and start a hit's text mid-word): the start moves back to its word's first token, the end back
        # before a word it would cut (the next window, overlapping, holds that word whole). A word longer than
        # a window is cut where it must be.
        while first > previous + 1 and words[first] is not None and words[first - 1] == words[first]:
            first -= 1
        last = min(first + params.max_tokens, n) - 1
        end_at = last
        while end_at > first and last < n - 1 and words[end_at] is not None and words[end_at + 1] == words[end_at]:
            end_at -= 1
        if end_at > first or last == n - 1:
            last = end_at
        start = 0 if first == 0 else offsets[first][0]
        end = len(text) if last == n - 1 else offsets[last][1]
        spans.append(Span(len(spans), start, end))
        if last == n - 1:
            return spans
        previous = first
        first = min(first + stride, last + 1)


def _word_ids(enc: object, n: int) -> list[int | None]:
    """Which word each token belongs to (the tokenizer's pre-tokenisation: punctuation is a word of its own);
    every token its own word where the tokenizer cannot say (a slow tokenizer), which cuts as before."""
    try:
        ids = enc.word_ids()  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return list(range(n))
    return list(ids) if ids is not None and len(ids) == n else list(range(n))
