"""Tokenises a batch of pairs and attaches the false-negative mask computed from the surrogate vectors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from models import EmbedderConfig
from training.contrastive.dataset import PairDataset
from training.data.batching import false_negative_mask
from training.data.hard_negatives import Mined


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


@dataclass
class HardNegativeCollator(PairCollator):
    """Pairs plus their mined hard negatives: documents are the B positives, then H negatives per query.

    The exclusion mask grows to (B, B + B*H). Query i scores all B in-batch documents (minus surrogate-flagged false
    negatives, as before) and its own H hard negatives (Eq. 3); the other queries' hard negatives are left out of its
    partition function unless `share_hard_negatives` is set (more negatives, but unfiltered for query i).
    """

    mined: Mined | None = None
    share_hard_negatives: bool = False

    def __call__(self, indices: list[int]) -> dict[str, Any]:
        batch = super().__call__(indices)
        if self.mined is None or self.mined.negatives.shape[1] == 0:
            return batch
        b, h = len(indices), self.mined.negatives.shape[1]
        pairs = [self.data.pairs[i] for i in indices]
        rows = self.mined.negatives[indices].reshape(-1)  # (B*H,): query-major
        texts = [p.document for p in pairs] + [self.mined.pool.texts[r] for r in rows]
        prefix = self.embedder_config.document_prefix
        batch["documents"] = self._tok([prefix + t for t in texts], self.doc_max_length)  # (B + B*H, L)
        exclude = torch.zeros(b, b + b * h, dtype=torch.bool)  # (B, N)
        if "exclude" in batch:
            exclude[:, :b] = batch["exclude"]
        if not self.share_hard_negatives:
            owner = torch.arange(b).repeat_interleave(h)  # (B*H,): the query each negative was mined for
            exclude[:, b:] = owner.unsqueeze(0) != torch.arange(b).unsqueeze(1)  # (B, B*H)
        else:
            # Another query's negative may be this query's own positive document.
            neg_docs = [self.mined.pool.doc_ids[r] for r in rows]
            for i, p in enumerate(pairs):
                exclude[i, b:] |= torch.tensor([d == p.doc_id for d in neg_docs])
        batch["exclude"] = exclude
        return batch
