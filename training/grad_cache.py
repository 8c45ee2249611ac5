"""What every gradient-cached step (CDE two-stage, MoE / dense bi-encoder) shares: chunking a tokenised batch
and replaying dropout. The no-grad pass and the grad pass over a chunk must see the same dropout masks, or the
cached gradients would belong to another function."""

from __future__ import annotations

import torch


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
