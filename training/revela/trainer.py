"""The HF Trainer for Revela and REPLUG: whole prepared batches (their chunks must stay together), our loss,
and the similarity diagnostics logged beside it."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import Trainer

from training.revela.dataset import BatchOrder


class RevelaTrainer(Trainer):
    def __init__(self, *args: Any, batch_order: BatchOrder, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batch_order = batch_order
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        loader = torch.utils.data.DataLoader(
            self.train_dataset,  # type: ignore[arg-type]
            batch_sampler=self.batch_order,  # one prepared batch per step; never re-mixed
            collate_fn=self.data_collator,
            num_workers=0,
        )
        return self.accelerator.prepare(loader)  # type: ignore[no-any-return]

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        out = model(**inputs)
        if model.training:
            for name, value in out.metrics.items():
                self._sums[name] = self._sums.get(name, 0.0) + float(value)
                self._counts[name] = self._counts.get(name, 0) + 1
        return (out.loss, out) if return_outputs else out.loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._counts:
            logs = {**logs, **{k: round(self._sums[k] / self._counts[k], 4) for k in self._sums}}
            self._sums, self._counts = {}, {}
        super().log(logs, start_time)
