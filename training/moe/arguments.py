"""Arguments of `vela train moe`: the contrastive ones plus upcycling and routing; Matryoshka at 256 by default."""

from __future__ import annotations

from dataclasses import dataclass, field

from training.contrastive.arguments import ContrastiveArguments

DEFAULT_MATRYOSHKA_DIM = 256


@dataclass
class MoeArguments(ContrastiveArguments):
    num_experts: int = field(default=8, metadata={"help": "E: experts per MoE block (copies of the dense FFN)"})
    top_k: int = field(default=2, metadata={"help": "experts per token (1: switch routing)"})
    moe_layers: list[int] = field(
        default_factory=list, metadata={"help": "layers made MoE (default: every second from the second)"}
    )
    router_aux_loss_coef: float = field(default=1.0, metadata={"help": "alpha of the load-balancing loss (Eq. 1)"})
    # Nomic Embed v2 trains 768 and 256; the full dimension is always trained.
    matryoshka_dims: list[int] = field(
        default_factory=lambda: [DEFAULT_MATRYOSHKA_DIM],
        metadata={"help": f"prefix dims trained besides the full one (0: none; default {DEFAULT_MATRYOSHKA_DIM})"},
    )

    def check_matryoshka_dims(self, full: int | None) -> None:
        """As the contrastive recipe's, plus `0` alone for none; the default becomes the full size on a model no
        wider than it (small test models), where a given dim past the size is refused."""
        if self.matryoshka_dims == [0]:
            self.matryoshka_dims = []
        elif self.matryoshka_dims == [DEFAULT_MATRYOSHKA_DIM] and full is not None and full <= DEFAULT_MATRYOSHKA_DIM:
            self.matryoshka_dims = [full]  # what the loss made of it before: the full dimension alone
        super().check_matryoshka_dims(full)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_experts < 1 or not 1 <= self.top_k <= self.num_experts:
            raise ValueError("need num_experts >= 1 and 1 <= top_k <= num_experts")
        if self.router_aux_loss_coef < 0:
            raise ValueError(f"router_aux_loss_coef must be >= 0, got {self.router_aux_loss_coef}")
        if self.lora_r > 0:
            raise ValueError("LoRA is not supported for MoE experts: train the MoE model fully (--lora_r 0)")
