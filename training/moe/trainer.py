"""MoE embedder training: the contrastive recipe (InfoNCE or Matryoshka InfoNCE, in-batch + hard negatives) plus
the load-balancing loss of every forward pass, with optional gradient caching.

Step loss = contrastive + (aux(queries) + aux(documents)) / 2, each aux the MoE model's alpha * Eq. 1 over that
side's real tokens. Gradient caching keeps that loss exact: the no-grad pass counts each side's routing over the
whole batch, and each chunk's grad pass scores its router probabilities against those counts (`balance_loss` is
linear in them), so the chunks' aux terms add up to the whole batch's.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoTokenizer

from models import EmbedderConfig, resolve_model_dir
from models.embedder.modeling_embedder import pool
from models.loading import model_type
from models.moe import MoeModel
from training.contrastive.trainer import ContrastiveTrainer
from training.grad_cache import Encoding
from training.moe.arguments import MoeArguments

log = logging.getLogger("vela.train")


class MoeBiEncoder(nn.Module):
    """The MoE encoder for queries and documents, pooled as the embedder config says, with its aux loss."""

    routes_tokens = True  # the cached step passes it the whole batch's routing counts (training/grad_cache.py)

    def __init__(self, backbone: MoeModel, embedder_config: EmbedderConfig) -> None:
        super().__init__()
        self.backbone = backbone
        self.config = backbone.config  # the Trainer reads model.config
        self.embedder_config = embedder_config

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        balance_stats: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> Encoding:
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, balance_stats=balance_stats)
        emb = pool(out.last_hidden_state, attention_mask, self.embedder_config)  # (B, d)
        aux = out.aux_loss if out.aux_loss is not None else emb.new_zeros(())
        return Encoding(emb, aux, out.router_counts, out.router_tokens)


def build(args: MoeArguments) -> tuple[MoeBiEncoder, Any, EmbedderConfig]:
    """Upcycle the dense `--model`, or go on training a saved MoE model (e.g. fine-tuning after pretraining)."""
    root = resolve_model_dir(args.model)
    if model_type(root) == "vela_moe":
        model = MoeModel.from_pretrained(root, local_files_only=True)
    else:
        model = MoeModel.upcycle(
            root,
            num_experts=args.num_experts,
            top_k=args.top_k,
            moe_layers=args.moe_layers or None,
            router_aux_loss_coef=args.router_aux_loss_coef,
        )
    counts = model.parameter_counts()
    log.info(
        "MoE model: layers %s, %d total parameters, %d active", model.moe_layers, counts["total"], counts["active"]
    )
    tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
    emb = EmbedderConfig.from_dir(root)
    emb = EmbedderConfig.from_dict({**emb.to_dict(), "normalize": True, "backend": "torch"})
    return MoeBiEncoder(model, emb), tokenizer, emb


def save(model: MoeBiEncoder, out: Path) -> None:
    """The MoE model directory, with its parameter counts beside it (`parameter_counts.json`)."""
    model.backbone.save_pretrained(out)
    (out / "parameter_counts.json").write_text(json.dumps(model.backbone.parameter_counts(), indent=2))


class MoeTrainer(ContrastiveTrainer):
    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self._aux: list[float] = []  # aux losses since the last log line

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        q, d = model(**inputs["queries"]), model(**inputs["documents"])
        aux = (q.aux_loss + d.aux_loss) / 2
        loss = self.loss_fn.compute_loss_from_embeddings(q.embeddings, d.embeddings, inputs.get("exclude")) + aux
        self._aux.append(float(aux.detach()))
        return (loss, {"q": q.embeddings, "d": d.embeddings}) if return_outputs else loss

    def record_aux_loss(self, aux: torch.Tensor) -> None:
        self._aux.append(float(aux))

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if self._aux and "loss" in logs:
            logs["aux_loss"] = round(sum(self._aux) / len(self._aux), 6)
            self._aux.clear()
        super().log(logs, *args, **kwargs)
