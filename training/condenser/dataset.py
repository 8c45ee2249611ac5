"""Pretraining passages: every document of the given corpora, tokenized and cut into max_length pieces."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset
from tqdm import tqdm

from training.data.pairs import read_documents


def chunk_corpora(sources: list[str], tokenizer: Any, *, max_length: int, min_tokens: int) -> list[list[int]]:
    """Token ids of [CLS] piece [SEP], pieces of at most max_length - 2 tokens of "title. text"."""
    body = max_length - 2
    chunks: list[list[int]] = []
    for source in sources:
        docs = read_documents(Path(source))
        for title, text in tqdm(docs.values(), desc=f"tokenize {Path(source).name}", unit="doc"):
            ids = tokenizer(f"{title}. {text}" if title else text, add_special_tokens=False)["input_ids"]
            for start in range(0, len(ids), body):
                piece = ids[start : start + body]
                if len(piece) >= min_tokens:
                    chunks.append([tokenizer.cls_token_id, *piece, tokenizer.sep_token_id])
    if not chunks:
        raise ValueError(f"no passage of at least {min_tokens} tokens in {sources}")
    return chunks


def split_held_out(
    chunks: list[list[int]], *, fraction: float, cap: int, seed: int
) -> tuple[list[list[int]], list[list[int]]]:
    """(train, held out): a seeded sample of passages never trained on, to measure MLM loss before and after."""
    order = list(range(len(chunks)))
    random.Random(seed).shuffle(order)
    n_eval = max(1, min(cap, int(len(chunks) * fraction)))
    held = set(order[:n_eval])
    return [c for i, c in enumerate(chunks) if i not in held], [chunks[i] for i in sorted(held)]


class PassageDataset(Dataset[dict[str, Any]]):
    """Passages with their index, which seeds their masks (training/condenser/trainer.py `PassageMasker`)."""

    def __init__(self, chunks: list[list[int]]) -> None:
        self.chunks = chunks

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.chunks[i], "index": i}
