"""Gradient caching (Gao et al.). What every cached step (CDE two-stage, MoE / dense bi-encoder) shares:
chunking a tokenised batch and replaying dropout (the no-grad pass and the grad pass over a chunk must see the
same dropout masks, or the cached gradients would belong to another function), and the bi-encoder step itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

SIDES = ("queries", "documents")


def split_inputs(inputs: dict[str, torch.Tensor], size: int) -> list[dict[str, torch.Tensor]]:
    """A tokenised batch (B, L) cut into chunks of at most `size` rows."""
    n = inputs["input_ids"].shape[0]
    return [{k: v[i : i + size] for k, v in inputs.items()} for i in range(0, n, size)]


class RngState:
    """The RNG state just before a no-grad pass, so the grad pass replays the same dropout masks."""

    def __init__(self) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


class Encoding(NamedTuple):
    """What a routed (MoE) bi-encoder returns; a dense one returns the embeddings alone."""

    embeddings: torch.Tensor  # (B, d)
    aux_loss: torch.Tensor  # () alpha * Eq. 1 (0 for a model without MoE blocks)
    router_counts: torch.Tensor | None  # (n_blocks, E)
    router_tokens: torch.Tensor | None  # (n_blocks,)


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
) -> Encoding:
    if not getattr(model, "routes_tokens", False):
        emb = model(**part)  # (c, d): a dense bi-encoder
        return Encoding(emb, emb.new_zeros(()), None, None)
    return model(**part, balance_stats=stats)  # type: ignore[no-any-return]
