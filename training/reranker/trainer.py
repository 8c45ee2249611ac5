"""The HF Trainer with RankMamba's InfoNCE loss (eq. 6): each query's positive against its BM25 negatives."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from transformers import Trainer


class RerankerTrainer(Trainer):
    """Batches are groups of `group_size` rows (positive first); the loss is cross-entropy over each group's
    scores with the positive as the target, averaged over the queries of the batch."""

    def __init__(self, *args: Any, group_size: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group_size = group_size

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        logits = model(**inputs).logits  # (B * G,)
        scores = logits.float().view(-1, self.group_size)  # (B, G): softmax in fp32, even under bf16 autocast
        target = torch.zeros(scores.size(0), dtype=torch.long, device=scores.device)  # (B,): column 0
        loss = F.cross_entropy(scores, target)
        return (loss, {"scores": scores}) if return_outputs else loss

    def _save(self, output_dir: str | None = None, state_dict: dict[str, Any] | None = None) -> None:
        super()._save(output_dir, state_dict)
        # A LoRA checkpoint holds adapters only; its reranker config (which names the backbone) lets
        # `training.reranker.modeling.load` rebuild and merge it.
        base = getattr(self.model, "get_base_model", None)
        if base is not None and output_dir is not None:
            base().config.save_pretrained(output_dir)


__all__ = ["RerankerTrainer"]
