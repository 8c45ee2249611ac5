"""Tokenises a batch of pairs and attaches the false-negative mask computed from the surrogate vectors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from models import EmbedderConfig
from training.contrastive.dataset import PairDataset
from training.data.batching import false_negative_mask


@dataclass
class PairCollator:
    data: PairDataset
    tokenizer: PreTrainedTokenizerBase
    embedder_config: EmbedderConfig
    query_max_length: int
    doc_max_length: int
    fn_margin: float

    def _tok(self, texts: list[str], max_length: int) -> dict[str, torch.Tensor]:
        out = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return {"input_ids": out["input_ids"], "attention_mask": out["attention_mask"]}

    def __call__(self, indices: list[int]) -> dict[str, Any]:
        pairs = [self.data.pairs[i] for i in indices]
        cfg = self.embedder_config
        batch: dict[str, Any] = {
            "queries": self._tok([cfg.query_prefix + p.query for p in pairs], self.query_max_length),
            "documents": self._tok([cfg.document_prefix + p.document for p in pairs], self.doc_max_length),
        }
        if self.fn_margin >= 0:
            mask = false_negative_mask(
                self.data.q_vecs,
                self.data.d_vecs,
                indices,
                [p.query_id for p in self.data.pairs],
                [p.doc_id for p in self.data.pairs],
                self.fn_margin,
            )
            batch["exclude"] = torch.from_numpy(mask)  # (B, B)
        return batch
