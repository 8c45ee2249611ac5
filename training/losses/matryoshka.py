"""Matryoshka InfoNCE (Kusupati et al.; Nomic Embed v2 4.5): the InfoNCE loss at several prefix dimensions.

At each dimension m the embeddings are cut to their first m coordinates and re-normalised, with the very function
inference uses (`truncate_embeddings`), so an index of m-d vectors holds what the loss trained. The loss is the
mean over the dimensions, so its scale matches plain InfoNCE.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from models.embedder.modeling_embedder import truncate_embeddings
from training.losses.infonce import InfoNCELoss


def resolve_dims(dims: Sequence[int], full: int) -> tuple[int, ...]:
    """The dims to train, widest first: always the full one, plus each 0 < m < full (m <= 0: ignored, m >= full:
    the full one)."""
    return (full, *sorted({m for m in dims if 0 < m < full}, reverse=True))


class MatryoshkaInfoNCELoss(nn.Module):
    def __init__(self, dims: Sequence[int], temperature: float = 0.02) -> None:
        super().__init__()
        self.dims = tuple(dims)
        self.infonce = InfoNCELoss(temperature)

    def compute_loss_from_embeddings(
        self, queries: torch.Tensor, documents: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> torch.Tensor:
        """queries (B, d), documents (N, d) unit rows, N >= B (as InfoNCELoss). The full dimension is always
        trained, however `dims` was given."""
        dims = resolve_dims(self.dims, queries.shape[-1])
        losses = [
            self.infonce.compute_loss_from_embeddings(
                truncate_embeddings(queries, m), truncate_embeddings(documents, m), exclude
            )
            for m in dims
        ]
        return torch.stack(losses).mean()

    def forward(
        self, queries: torch.Tensor, documents: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.compute_loss_from_embeddings(queries, documents, exclude)
