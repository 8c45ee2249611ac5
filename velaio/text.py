"""Text shared by the index and the trainers, so both read a passage exactly the same way."""

from __future__ import annotations


def passage_text(title: str, body: str) -> str:
    """What the embedder and BM25 read for a passage: the document title, then the passage."""
    return f"{title}\n{body}" if title else body
