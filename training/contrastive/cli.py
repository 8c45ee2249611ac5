"""`vela train contrastive`: fine-tune a bi-encoder with InfoNCE on qrels and/or mined pairs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _save(model: Any, out: Path) -> None:
    from training.contrastive.trainer import merge_lora

    merged: Any = merge_lora(model.backbone)
    merged.save_pretrained(out)


def main(argv: Sequence[str]) -> int:
    from training.contrastive.arguments import ContrastiveArguments
    from training.contrastive.run import train_recipe
    from training.contrastive.trainer import ContrastiveTrainer, build

    return train_recipe(
        "contrastive",
        argv,
        args_cls=ContrastiveArguments,
        build=build,
        trainer_cls=ContrastiveTrainer,
        save_weights=_save,
    )
