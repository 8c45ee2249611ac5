"""Pairs, their surrogate embeddings, and the per-epoch batch plan the trainer's data loader walks."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
import torch

from training.contrastive.arguments import ContrastiveArguments
from training.data.batching import make_batches, mean_negative_similarity
from training.data.pairs import Pair, load_pairs

log = logging.getLogger("vela.train")


class PairDataset(torch.utils.data.Dataset[int]):
    """Item i is just i: the collator reads the pair and its surrogate vectors."""

    def __init__(self, pairs: list[Pair], q_vecs: np.ndarray, d_vecs: np.ndarray) -> None:
        self.pairs = pairs
        self.q_vecs = q_vecs  # (N, d) surrogate query embeddings
        self.d_vecs = d_vecs  # (N, d) surrogate document embeddings

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> int:
        return i


class BatchPlan(torch.utils.data.Sampler[list[int]]):
    """Every epoch's batches, computed up front (so the step count is exact), each epoch packed anew."""

    def __init__(self, data: PairDataset, args: ContrastiveArguments, seed: int) -> None:
        self.batches: list[list[int]] = []
        self.hardness: list[float] = []
        for epoch in range(args.epochs):
            batches = make_batches(
                data.q_vecs,
                data.d_vecs,
                args.batch_size,
                strategy=args.batching,
                packing=args.packing,
                cluster_size=args.cluster_size or None,
                seed=seed + epoch,
            )
            self.hardness.append(mean_negative_similarity(data.q_vecs, data.d_vecs, batches))
            self.batches += batches

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)


def build_dataset(args: ContrastiveArguments, seed: int) -> PairDataset:
    from models import load_embedder

    pairs = load_pairs(args.pairs)
    if args.max_pairs and len(pairs) > args.max_pairs:
        keep = np.random.default_rng(seed).choice(len(pairs), args.max_pairs, replace=False)
        pairs = [pairs[i] for i in sorted(keep)]
    surrogate = load_embedder(args.surrogate)
    log.info("embedding %d pairs with the surrogate %s", len(pairs), surrogate.name)
    q = surrogate.encode_queries([p.query for p in pairs])  # (N, d)
    d = surrogate.encode_documents([p.document for p in pairs])  # (N, d)
    return PairDataset(pairs, q, d)
