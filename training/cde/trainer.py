"""CDE training: both stages from a packaged encoder, a context shared by the batch, InfoNCE, optional
two-stage gradient caching (the paper's GradCache variant).

Per step the context is M1 over (up to J of) the batch's own documents, computed once and reused by every
query and document of the batch through the graph (paper 4.2: "sharing context within a batch").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer

from models import EmbedderConfig, resolve_model_dir
from models.cde import CdeConfig, CdeModel
from training.cde.arguments import CdeArguments
from training.contrastive.trainer import ContrastiveTrainer
from training.grad_cache import RngState, split_inputs


def build(args: CdeArguments) -> tuple[CdeModel, Any, EmbedderConfig]:
    """M1 and M2 both start as copies of the pretrained encoder (separate weights, as in the paper)."""
    root = resolve_model_dir(args.model)
    first_root = resolve_model_dir(args.first_stage) if args.first_stage else root
    first = AutoModel.from_pretrained(first_root, local_files_only=True)
    second = AutoModel.from_pretrained(root, local_files_only=True)
    config = CdeConfig.from_backbones(
        first.config,
        second.config,
        corpus_context_size=args.corpus_context_size,
        sequence_dropout_prob=args.sequence_dropout_prob,
    )
    model = CdeModel(config)
    model.first_stage.load_state_dict(first.state_dict())
    model.second_stage.load_state_dict(second.state_dict())
    tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
    emb = EmbedderConfig.from_dir(root)
    emb = EmbedderConfig.from_dict({**emb.to_dict(), "pooling": "mean", "normalize": True, "backend": "torch"})
    return model, tokenizer, emb


def context_subset(n_docs: int, j: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Which of the batch's documents form the context: all when the batch has <= J, else J sampled."""
    if n_docs <= j:
        return torch.arange(n_docs)
    return torch.randperm(n_docs, generator=generator)[:j]


class CdeTrainer(ContrastiveTrainer):
    def _step_context(
        self, model: CdeModel, docs: dict[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        j = int(model.config.corpus_context_size)
        sel = context_subset(docs["input_ids"].shape[0], j).to(docs["input_ids"].device)
        ctx_inputs = {k: v[sel] for k, v in docs.items()}
        drop = model.sample_dropout_mask(len(sel), docs["input_ids"].device)  # (J,) or None
        return ctx_inputs, drop

    def embed(self, model: nn.Module, inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        cde: CdeModel = self.accelerator.unwrap_model(model)
        ctx_inputs, drop = self._step_context(cde, inputs["documents"])
        context = cde.embed_context(**ctx_inputs)  # (J, d1), shared by the whole batch
        q = model(**inputs["queries"], context=context, dropout_mask=drop)  # (B, d)
        d = model(**inputs["documents"], context=context, dropout_mask=drop)  # (B, d)
        return q, d

    def training_step(self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        if not self.cargs.grad_cache:
            return super().training_step(model, inputs, num_items_in_batch)
        model.train()
        inputs = self._prepare_inputs(inputs)
        loss = cached_step(
            self.accelerator.unwrap_model(model),
            inputs,
            self.loss_fn.compute_loss_from_embeddings,
            self.cargs.grad_cache_chunk,
            backward=self.accelerator.backward,
            context_inputs=self._step_context(self.accelerator.unwrap_model(model), inputs["documents"]),
        )
        return loss.detach() / self.args.gradient_accumulation_steps


def cached_step(
    model: CdeModel,
    inputs: dict[str, Any],
    loss_fn: Callable[..., torch.Tensor],
    chunk: int,
    *,
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward,
    context_inputs: tuple[dict[str, torch.Tensor], torch.Tensor | None],
) -> torch.Tensor:
    """Two-stage gradient caching. Memory holds one chunk's activations at a time, never the batch's:

    1. no grad: context C = M1(context docs), then q, d = M2(queries | docs; C), chunk by chunk;
    2. the loss on detached q, d gives dL/dq, dL/dd;
    3. M2 again with grad, chunk by chunk, backpropagating dL/dq, dL/dd: parameter grads of M2 and dL/dC;
    4. M1 again with grad, chunk by chunk, backpropagating dL/dC.
    Dropout masks replay exactly (RNG state saved per chunk), so the gradients equal the uncached ones.
    """
    ctx_inputs, drop = context_inputs
    ctx_chunks = split_inputs(ctx_inputs, chunk)
    ctx_states: list[RngState] = []
    ctx_parts = []
    with torch.no_grad():
        for part in ctx_chunks:
            ctx_states.append(RngState())  # taken just before the pass it replays
            ctx_parts.append(model.embed_context(**part))
    context = torch.cat(ctx_parts)  # (J, d1)
    # Step 1 for M2 with the context as a leaf that collects dL/dC in step 3.
    context_leaf = context.detach().requires_grad_(True)
    reps: dict[str, list[torch.Tensor]] = {"queries": [], "documents": []}
    states: dict[str, list[RngState]] = {"queries": [], "documents": []}
    with torch.no_grad():
        for side in ("queries", "documents"):
            for part in split_inputs(inputs[side], chunk):
                states[side].append(RngState())
                reps[side].append(model(**part, context=context_leaf, dropout_mask=drop))
    q = torch.cat(reps["queries"]).detach().requires_grad_(True)  # (B, d)
    d = torch.cat(reps["documents"]).detach().requires_grad_(True)  # (B, d)
    loss = loss_fn(q, d, inputs.get("exclude"))
    loss.backward()  # step 2: only q and d are leaves here
    assert q.grad is not None and d.grad is not None
    grads = {"queries": q.grad.split(chunk), "documents": d.grad.split(chunk)}
    for side in ("queries", "documents"):  # step 3
        for state, part, grad in zip(states[side], split_inputs(inputs[side], chunk), grads[side], strict=True):
            state.restore()
            out = model(**part, context=context_leaf, dropout_mask=drop)  # (c, d)
            backward((out * grad).sum())
    assert context_leaf.grad is not None
    for state, part, grad in zip(ctx_states, ctx_chunks, context_leaf.grad.split(chunk), strict=True):  # step 4
        state.restore()
        backward((model.embed_context(**part) * grad).sum())
    return loss.detach()
