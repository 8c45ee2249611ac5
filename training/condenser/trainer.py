"""Condenser pretraining on the HF Trainer, and the held-out MLM losses it is judged by."""

from __future__ import annotations

import hashlib
import os
from typing import Any, cast

import torch
from safetensors.torch import load_model, save_model
from torch import nn
from transformers import DataCollatorForLanguageModeling, Trainer
from transformers.utils import SAFE_WEIGHTS_NAME

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

    def _save(self, output_dir: str | None = None, state_dict: dict[str, Any] | None = None) -> None:
        """A checkpoint's weights. `save_pretrained` refuses this model (`mlm_head` is `mlm.cls` under a second
        name, and W is the word-embedding matrix), so each shared tensor is written once, under one of its
        names. The finished model is saved by the recipe, head dropped."""
        folder = str(output_dir or self.args.output_dir)
        os.makedirs(folder, exist_ok=True)
        save_model(self.accelerator.unwrap_model(self.model), os.path.join(folder, SAFE_WEIGHTS_NAME))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: nn.Module | None = None) -> None:
        # Strictly, each alias `_save` left out filled from the tensor it shares (the Trainer's own loading
        # would warn of every one of them as missing).
        target = cast(nn.Module, model if model is not None else self.model)
        load_model(target, os.path.join(resume_from_checkpoint, SAFE_WEIGHTS_NAME), device="cpu")


class PassageMasker(DataCollatorForLanguageModeling):
    """BERT masking of a batch of PassageDataset items, drawn from a generator seeded by the run's seed and the
    batch's passage indices rather than from the global RNG. The Trainer's data loader collates a batch ahead
    of the step that trains it, and a resumed run restores the RNG state only after that look-ahead: masks from
    the global RNG would differ from an uninterrupted run's. Each epoch shuffles the passages into other
    batches, so they still get new masks every epoch."""

    def __init__(self, tokenizer: Any, *, mlm_probability: float, seed: int) -> None:
        super().__init__(tokenizer, mlm_probability=mlm_probability)
        self.run_seed = seed

    def torch_call(self, examples: list[Any]) -> dict[str, Any]:
        batch = repr((self.run_seed, [e["index"] for e in examples])).encode()
        self.generator = torch.Generator().manual_seed(int.from_bytes(hashlib.blake2b(batch, digest_size=7).digest()))
        return super().torch_call([{"input_ids": e["input_ids"]} for e in examples])  # type: ignore[no-any-return]


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
