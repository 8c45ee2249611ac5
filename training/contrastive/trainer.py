"""Bi-encoder contrastive training on the HF Trainer: InfoNCE over in-batch negatives, batches from a plan.

`build()` returns the model to train (LoRA attached when asked); `save()` writes a plain embedder directory
(LoRA merged) that `load_embedder` and the service read with one call.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, Trainer, TrainingArguments

from models import EmbedderConfig, resolve_model_dir
from models.embedder.modeling_embedder import pool
from training.contrastive.arguments import ContrastiveArguments
from training.contrastive.dataset import BatchPlan, PairDataset
from training.grad_cache import cached_step
from training.losses.infonce import InfoNCELoss
from training.losses.matryoshka import MatryoshkaInfoNCELoss
from training.run_record import write_training_record


class BiEncoder(nn.Module):
    """One encoder for queries and documents, pooled as the embedder config says."""

    def __init__(self, backbone: PreTrainedModel, embedder_config: EmbedderConfig) -> None:
        super().__init__()
        self.backbone = backbone
        self.config = backbone.config  # the Trainer reads model.config
        self.embedder_config = embedder_config

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (B, L, d)
        return pool(hidden, attention_mask, self.embedder_config)  # (B, d)


def attach_lora(model: PreTrainedModel, args: ContrastiveArguments) -> PreTrainedModel:
    if args.lora_r <= 0:
        return model
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, target_modules=["query", "key", "value", "dense"])
    return get_peft_model(model, cfg)  # type: ignore[return-value]


def merge_lora(model: nn.Module) -> nn.Module:
    merge = getattr(model, "merge_and_unload", None)
    return merge() if callable(merge) else model


def build(args: ContrastiveArguments) -> tuple[BiEncoder, Any, EmbedderConfig]:
    root = resolve_model_dir(args.model)
    tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
    config = EmbedderConfig.from_dir(root)
    backbone = attach_lora(AutoModel.from_pretrained(root, local_files_only=True), args)
    return BiEncoder(backbone, config), tokenizer, config


class ContrastiveTrainer(Trainer):
    """The HF Trainer with our loss and our batch plan (clustered batches must stay whole)."""

    def __init__(
        self,
        *a: Any,
        plan: BatchPlan,
        loss_fn: InfoNCELoss | MatryoshkaInfoNCELoss,
        cargs: ContrastiveArguments,
        **kw: Any,
    ):
        super().__init__(*a, **kw)
        self.plan = plan
        self.loss_fn = loss_fn
        self.cargs = cargs

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        loader = torch.utils.data.DataLoader(
            self.train_dataset,  # type: ignore[arg-type]
            batch_sampler=self.plan,
            collate_fn=self.data_collator,
            num_workers=0,
        )
        return self.accelerator.prepare(loader)  # type: ignore[no-any-return]

    def embed(self, model: nn.Module, inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """(queries (B, d), documents (B, d)); the CDE trainer overrides this with its two stages."""
        return model(**inputs["queries"]), model(**inputs["documents"])

    def training_step(self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        if not self.cargs.grad_cache or type(self).embed is not ContrastiveTrainer.embed:
            return super().training_step(model, inputs, num_items_in_batch)
        model.train()
        inputs = self._prepare_inputs(inputs)
        loss, aux = cached_step(
            self.accelerator.unwrap_model(model),
            inputs,
            self.loss_fn.compute_loss_from_embeddings,
            self.cargs.grad_cache_chunk,
            backward=self.accelerator.backward,
        )
        self.record_aux_loss(aux)
        return loss / self.args.gradient_accumulation_steps

    def record_aux_loss(self, aux: torch.Tensor) -> None:
        """The cached step's auxiliary (MoE load-balancing) part of the loss; dense models have none."""

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        q, d = self.embed(model, inputs)
        loss = self.loss_fn.compute_loss_from_embeddings(q, d, inputs.get("exclude"))
        return (loss, {"q": q, "d": d}) if return_outputs else loss


def save_run(
    out: Path,
    *,
    cargs: Any,
    targs: TrainingArguments,
    command: str,
    plan: BatchPlan,
    data: PairDataset,
    trainer: Trainer,
    seconds: float,
) -> None:
    """The training arguments and what happened, beside the weights (`training_args.json`)."""
    history = [h for h in trainer.state.log_history if "loss" in h]
    record = {
        "command": command,
        "recipe_args": cargs.__dict__,
        "training_args": json.loads(targs.to_json_string()),
        "pairs": len(data),
        "steps": trainer.state.global_step,
        "batches_per_epoch": len(plan) // max(1, getattr(cargs, "epochs", 1)),
        "mean_negative_similarity_per_epoch": [round(h, 4) for h in plan.hardness],
        "loss_first": history[0]["loss"] if history else None,
        "loss_last": history[-1]["loss"] if history else None,
        "train_seconds": round(seconds, 1),
        "finished_at": time.time(),
    }
    write_training_record(out, record)
