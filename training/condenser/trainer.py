"""Condenser pretraining on the HF Trainer, and the held-out MLM losses it is judged by."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import DataCollatorForLanguageModeling, Trainer

from models.condenser import CondenserForPretraining


class CondenserTrainer(Trainer):
    """Logs the two MLM losses (head, Eq. 9; backbone, Eq. 10) next to their sum."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parts = torch.zeros(2)
        self._count = 0

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        out = model(**inputs)
        if model.training:
            self._parts += torch.stack([out.head_mlm_loss.float().cpu(), out.backbone_mlm_loss.float().cpu()])
            self._count += 1
        return (out.loss, out) if return_outputs else out.loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self._count and "loss" in logs:
            head, backbone = (self._parts / self._count).tolist()
            logs = {**logs, "head_mlm_loss": round(head, 4), "backbone_mlm_loss": round(backbone, 4)}
            self._parts.zero_()
            self._count = 0
        super().log(logs, start_time)


@torch.no_grad()
def held_out_mlm_loss(
    model: CondenserForPretraining, chunks: list[list[int]], tokenizer: Any, *, probability: float, batch: int = 32
) -> dict[str, float]:
    """Mean head and backbone MLM losses on held-out passages, masked the same way (fixed seed) every call."""
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability, seed=1234)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    sums, n = torch.zeros(2), 0
    for start in range(0, len(chunks), batch):
        inputs = collator([{"input_ids": c} for c in chunks[start : start + batch]])
        out = model(**{k: v.to(device) for k, v in inputs.items()})
        sums += torch.stack([out.head_mlm_loss.float().cpu(), out.backbone_mlm_loss.float().cpu()])
        n += 1
    model.train(was_training)
    head, backbone = (sums / max(n, 1)).tolist()
    return {"head_mlm_loss": round(head, 4), "backbone_mlm_loss": round(backbone, 4)}
