"""Configuration of Condenser pretraining (Gao & Callan 2021): a BERT-family backbone split into early and late
layers, plus a small head that reads [late CLS ; early token states] and predicts masked tokens.

Only pretraining uses the head; what the trainer saves afterwards is the backbone alone, a plain encoder.
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import AutoConfig, PreTrainedConfig
from transformers.configuration_utils import SubConfigSpec


def check_architecture(layers: int, *, early_layers: int, head_layers: int, backbone_mlm_weight: float) -> None:
    """Whether a Condenser can be built on a backbone of `layers` layers (ValueError if not). A plain function, so
    that `vela train condenser` refuses its flags from the backbone's config.json before anything loads."""
    if layers < 2:
        raise ValueError(f"a Condenser needs a backbone of at least 2 layers, got {layers}")
    if not 0 <= early_layers < layers:
        raise ValueError(f"early_layers must be in [1, {layers - 1}] (0: half), got {early_layers}")
    if head_layers < 1:
        raise ValueError(f"head_layers must be >= 1, got {head_layers}")
    if not backbone_mlm_weight >= 0:
        raise ValueError(f"backbone_mlm_weight must be >= 0, got {backbone_mlm_weight}")


@strict
class CondenserConfig(PreTrainedConfig):
    model_type = "vela_condenser"
    sub_configs_defaults = {"backbone": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    backbone: PreTrainedConfig | dict | None = None
    # L^e: backbone layers whose output the head skip-connects to (0: half of the backbone, as the paper's 6/6).
    early_layers: int = 0
    # L^h: Transformer layers of the head (the paper uses 2), freshly initialised.
    head_layers: int = 2
    # Weight of the backbone-MLM constraint (Eq. 10) in L = L_mlm + w * L_mlm^c (the paper: w = 1).
    backbone_mlm_weight: float = 1.0

    def validate_architecture(self) -> None:
        if self.backbone is None:
            return  # filled in before use; `resolved_early_layers` refuses to run without it
        check_architecture(
            int(getattr(self.backbone, "num_hidden_layers", 0)),
            early_layers=self.early_layers,
            head_layers=self.head_layers,
            backbone_mlm_weight=self.backbone_mlm_weight,
        )

    @property
    def resolved_early_layers(self) -> int:
        if self.backbone is None:
            raise ValueError("a CondenserConfig needs a backbone config")
        return self.early_layers or int(getattr(self.backbone, "num_hidden_layers")) // 2  # noqa: B009
