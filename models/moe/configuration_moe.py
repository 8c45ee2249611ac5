"""Configuration of a sparse MoE encoder: a BERT-family backbone whose chosen feed-forward blocks are MoE blocks.

The backbone is stored as a full sub-configuration (as the CDE stores its stages), so a saved model loads with one
`AutoModel.from_pretrained(dir)` call; `hidden_size` and `max_position_embeddings` read through to it, which is all
`Embedder` asks of a config.
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import AutoConfig, PreTrainedConfig
from transformers.configuration_utils import SubConfigSpec

TOP_K_MAX = 8


def alternate_layers(num_layers: int) -> list[int]:
    """Every second layer starting from the second (paper 4.3, after Komatsuzaki et al.): 1, 3, 5, ..."""
    return list(range(1, num_layers, 2))


@strict
class MoeConfig(PreTrainedConfig):
    model_type = "vela_moe"
    sub_configs_defaults = {"encoder": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    encoder: PreTrainedConfig | dict | None = None
    # E: experts per MoE block, each initialised as a copy of the dense FFN when upcycled.
    num_experts: int = 8
    # Experts per token: 2 (paper 4.3) or 1 ("switch" routing, paper 7.1).
    top_k: int = 2
    # Which layers' FFNs are MoE blocks; None: every second one from the second layer.
    moe_layers: list[int] | None = None
    # alpha of the load-balancing loss (Eq. 1); the paper uses 1.
    router_aux_loss_coef: float = 1.0

    def validate_architecture(self) -> None:
        if self.num_experts < 1:
            raise ValueError(f"num_experts must be >= 1, got {self.num_experts}")
        if not 1 <= self.top_k <= min(self.num_experts, TOP_K_MAX):
            raise ValueError(f"top_k must be in [1, min(num_experts, {TOP_K_MAX})], got {self.top_k}")
        if self.router_aux_loss_coef < 0:
            raise ValueError(f"router_aux_loss_coef must be >= 0, got {self.router_aux_loss_coef}")
        layers = self.moe_layers or []
        if len(set(layers)) != len(layers) or any(i < 0 for i in layers):
            raise ValueError(f"moe_layers must be distinct layer indices, got {layers}")

    @property
    def layers(self) -> list[int]:
        """The MoE layer indices, resolved against the backbone's depth."""
        n = int(getattr(self.encoder, "num_hidden_layers", 0))
        layers = alternate_layers(n) if self.moe_layers is None else sorted(self.moe_layers)
        if any(i >= n for i in layers):
            raise ValueError(f"moe_layers {layers} out of range for a {n}-layer encoder")
        return layers

    @property
    def hidden_size(self) -> int:  # type: ignore[override]
        return int(getattr(self.encoder, "hidden_size"))  # noqa: B009

    @property
    def max_position_embeddings(self) -> int | None:
        return getattr(self.encoder, "max_position_embeddings", None)

    @classmethod
    def from_encoder(cls, encoder: PreTrainedConfig, **kwargs: object) -> MoeConfig:
        return cls(encoder=encoder.to_dict(), **kwargs)  # type: ignore[arg-type]
