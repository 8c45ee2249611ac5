"""`vela train moe`: upcycle a dense encoder to a sparse MoE embedder; InfoNCE with in-batch and mined hard
negatives, Matryoshka dims, load balancing, optional gradient caching."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    from training.contrastive.run import train_recipe
    from training.moe.arguments import MoeArguments
    from training.moe.trainer import MoeTrainer, build, save

    return train_recipe("moe", argv, args_cls=MoeArguments, build=build, trainer_cls=MoeTrainer, save_weights=save)
