"""`vela train cde`: a contextual document embedder (two stages from MiniLM), clustered batches, InfoNCE."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _save(model: Any, out: Path) -> None:
    model.save_pretrained(out)


def main(argv: Sequence[str]) -> int:
    from training.cde.arguments import CdeArguments
    from training.cde.trainer import CdeTrainer, build
    from training.contrastive.run import train_recipe

    return train_recipe("cde", argv, args_cls=CdeArguments, build=build, trainer_cls=CdeTrainer, save_weights=_save)
