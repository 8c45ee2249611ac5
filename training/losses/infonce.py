"""InfoNCE with in-batch negatives (and optional extra negatives), temperature-scaled cosine scores.

`compute_loss_from_embeddings` holds the maths, so the plain trainer and the gradient-cached one (which calls
it on detached embeddings) compute exactly the same loss.
"""

from __future__ import annotations

import torch
from torch import nn


class InfoNCELoss(nn.Module):
    def __init__(self, temperature: float = 0.02) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = temperature

    def compute_loss_from_embeddings(
        self, queries: torch.Tensor, documents: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> torch.Tensor:
        """queries (B, d) and documents (N, d), unit rows; document i is query i's positive (N >= B: the rest
        are extra negatives). exclude (B, N) bool: candidates left out of query i's partition function
        (false negatives, Eq. 4 of the CDE paper); never the positive."""
        scores = queries @ documents.T / self.temperature  # (B, N)
        if exclude is not None:
            scores = scores.masked_fill(exclude.to(scores.device), float("-inf"))
        labels = torch.arange(queries.shape[0], device=scores.device)  # (B,)
        return nn.functional.cross_entropy(scores.float(), labels)

    def forward(
        self, queries: torch.Tensor, documents: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.compute_loss_from_embeddings(queries, documents, exclude)
