"""Tokenises a batch of pseudo-labelled examples: queries, positives, sampled negatives, margins and masks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from models import EmbedderConfig
from training.adapt.dataset import ExampleDataset


@dataclass
class AdaptCollator:
    data: ExampleDataset
    tokenizer: PreTrainedTokenizerBase
    embedder_config: EmbedderConfig
    negatives: int
    query_max_length: int
    doc_max_length: int
    seed: int = 0
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def _tok(self, texts: list[str], max_length: int) -> dict[str, torch.Tensor]:
        out = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return {"input_ids": out["input_ids"], "attention_mask": out["attention_mask"]}

    def __call__(self, indices: list[int]) -> dict[str, Any]:
        exs = [self.data.examples[i] for i in indices]
        b = len(exs)
        # H negatives for every query, or none: a batch is one (B, B + B*H) score matrix.
        h = min([self.negatives, *(len(e.negatives) for e in exs)])
        picks = [self.rng.choice(len(e.negatives), h, replace=False) for e in exs]  # H pool rows per query
        neg_texts = [e.negatives[j] for e, p in zip(exs, picks, strict=True) for j in p]  # (B*H,) query-major
        neg_ids = [e.negative_ids[j] for e, p in zip(exs, picks, strict=True) for j in p]
        cfg = self.embedder_config
        docs = [e.positive for e in exs] + neg_texts
        batch: dict[str, Any] = {
            "queries": self._tok([cfg.query_prefix + e.query for e in exs], self.query_max_length),
            "documents": self._tok([cfg.document_prefix + t for t in docs], self.doc_max_length),  # (B + B*H, L)
            "negatives": h,
        }
        # InfoNCE leaves out of query i's partition function any document of its own source (two pseudo-queries
        # of one document in a batch) and any mined negative the teacher scores at or above its positive.
        doc_ids = [e.doc_id for e in exs] + neg_ids
        exclude = torch.tensor([[d == e.doc_id for d in doc_ids] for e in exs])  # (B, B + B*H)
        exclude[torch.arange(b), torch.arange(b)] = False  # never the positive
        if h:
            margins = torch.tensor(np.stack([e.margins[p] for e, p in zip(exs, picks, strict=True)]))  # (B, H)
            own = torch.arange(b).repeat_interleave(h)  # (B*H,) the query each negative was mined for
            exclude[own, b + torch.arange(b * h)] |= margins.reshape(-1) <= 0
            batch["margins"] = margins
        batch["exclude"] = exclude
        return batch
