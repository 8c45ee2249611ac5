"""Margin-MSE (Hofstätter et al. 2020, as GPL uses it): the student copies the teacher's score *margins*.

For a query q, a pseudo-positive p and a mined negative n, the loss is (s(q,p) - s(q,n) - (t(q,p) - t(q,n)))^2.
Only differences are matched, so the teacher's scale need not be the student's: a pseudo-positive the teacher
scores below its negative (a bad pseudo-query, or a false negative) teaches that order instead of the wrong one,
which is why GPL prefers it to InfoNCE on generated queries.
"""

from __future__ import annotations

import torch
from torch import nn


class MarginMSELoss(nn.Module):
    def __init__(self, scale: float = 20.0) -> None:
        super().__init__()
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        self.scale = scale  # student cosines are multiplied by this: a margin of 0.05 cosine is 1 teacher unit

    def compute_loss_from_embeddings(
        self, queries: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor, teacher: torch.Tensor
    ) -> torch.Tensor:
        """queries (B, d), positives (B, d), negatives (B, H, d), unit rows; teacher (B, H): t(q,p) - t(q,n_h)."""
        pos = (queries * positives).sum(-1, keepdim=True)  # (B, 1)
        neg = torch.einsum("bd,bhd->bh", queries, negatives)  # (B, H)
        margins = (pos - neg).float() * self.scale  # (B, H)
        return nn.functional.mse_loss(margins, teacher.to(margins))

    def forward(
        self, queries: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor, teacher: torch.Tensor
    ) -> torch.Tensor:
        return self.compute_loss_from_embeddings(queries, positives, negatives, teacher)
