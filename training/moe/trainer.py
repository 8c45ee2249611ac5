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
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn
from transformers import AutoTokenizer

from models import EmbedderConfig, resolve_model_dir
from models.embedder.modeling_embedder import _model_type, pool
from models.moe import MoeModel
from training.contrastive.trainer import ContrastiveTrainer
from training.grad_cache import RngState, split_inputs
from training.moe.arguments import MoeArguments

log = logging.getLogger("vela.train")
SIDES = ("queries", "documents")


class MoeEncoding(NamedTuple):
    embeddings: torch.Tensor  # (B, d)
    aux_loss: torch.Tensor  # () alpha * Eq. 1 (0 for a model without MoE blocks)
    router_counts: torch.Tensor | None  # (n_blocks, E)
    router_tokens: torch.Tensor | None  # (n_blocks,)


class MoeBiEncoder(nn.Module):
    """The MoE encoder for queries and documents, pooled as the embedder config says, with its aux loss."""

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
    ) -> MoeEncoding:
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, balance_stats=balance_stats)
        emb = pool(out.last_hidden_state, attention_mask, self.embedder_config)  # (B, d)
        aux = out.aux_loss if out.aux_loss is not None else emb.new_zeros(())
        return MoeEncoding(emb, aux, out.router_counts, out.router_tokens)


def build(args: MoeArguments) -> tuple[MoeBiEncoder, Any, EmbedderConfig]:
    """Upcycle the dense `--model`, or go on training a saved MoE model (e.g. fine-tuning after pretraining)."""
    root = resolve_model_dir(args.model)
    if _model_type(root) == "vela_moe":
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


def cached_step(
    model: nn.Module,
    inputs: dict[str, Any],
    loss_fn: Callable[..., torch.Tensor],
    chunk: int,
    *,
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient caching (Gao et al.): memory holds one chunk's activations at a time. Returns (loss, aux part).

    1. no grad, chunk by chunk: embeddings, and each side's routing counts and real tokens over the whole batch;
    2. the contrastive loss on detached embeddings gives dL/dq, dL/dd;
    3. with grad, chunk by chunk (dropout replayed from the saved RNG state): backpropagate dL/d(embeddings) plus
       the chunk's share of the aux loss, scored against the whole batch's counts.
    A dense bi-encoder (whose forward returns the embeddings) works too: it has no aux loss.
    """
    reps: dict[str, list[torch.Tensor]] = {s: [] for s in SIDES}
    states: dict[str, list[RngState]] = {s: [] for s in SIDES}
    stats: dict[str, tuple[torch.Tensor, torch.Tensor] | None] = {}
    with torch.no_grad():
        for side in SIDES:
            counts, tokens = [], []
            for part in split_inputs(inputs[side], chunk):
                states[side].append(RngState())  # taken just before the pass it replays
                out = _encode(model, part, None)
                reps[side].append(out.embeddings)
                if out.router_counts is not None and out.router_tokens is not None:
                    counts.append(out.router_counts)
                    tokens.append(out.router_tokens)
            stats[side] = (torch.stack(counts).sum(0), torch.stack(tokens).sum(0)) if counts else None
    q = torch.cat(reps["queries"]).detach().requires_grad_(True)  # (B, d)
    d = torch.cat(reps["documents"]).detach().requires_grad_(True)  # (N, d)
    loss = loss_fn(q, d, inputs.get("exclude"))
    loss.backward()  # step 2: only q and d are leaves here
    assert q.grad is not None and d.grad is not None
    grads = {"queries": q.grad.split(chunk), "documents": d.grad.split(chunk)}
    aux = loss.new_zeros(())
    for side in SIDES:  # step 3
        for state, part, grad in zip(states[side], split_inputs(inputs[side], chunk), grads[side], strict=True):
            state.restore()
            out = _encode(model, part, stats[side])
            backward((out.embeddings * grad).sum() + out.aux_loss / 2)
            aux = aux + out.aux_loss.detach() / 2
    return loss.detach() + aux, aux


def _encode(
    model: nn.Module, part: dict[str, torch.Tensor], stats: tuple[torch.Tensor, torch.Tensor] | None
) -> MoeEncoding:
    if not isinstance(model, MoeBiEncoder):
        emb = model(**part)  # (c, d): a dense bi-encoder
        return MoeEncoding(emb, emb.new_zeros(()), None, None)
    return model(**part, balance_stats=stats)  # type: ignore[no-any-return]
