"""Groups -> one flat batch of (query, document) inputs, laid out by the reranker's own processor."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models.reranker.processing_reranker import RerankerProcessor
from training.reranker.dataset import Group


@dataclass
class RerankerCollator:
    processor: RerankerProcessor
    group_size: int

    def __call__(self, groups: list[Group]) -> dict[str, torch.Tensor]:
        if any(len(g.documents) != self.group_size for g in groups):
            raise ValueError(f"every group must hold {self.group_size} documents")
        queries = [g.query for g in groups for _ in g.documents]
        documents = [d for g in groups for d in g.documents]
        # Row i * group_size is group i's positive: the loss reshapes the scores to (B, group_size).
        return dict(self.processor(queries, documents))  # (B * G, L) each


__all__ = ["RerankerCollator"]
