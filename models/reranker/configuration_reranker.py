"""What a cross-encoder reranker is: its backbone, how (q, d) is laid out and pooled, and how long inputs get.

Saved as the `config.json` of a reranker directory (model_type `vela_reranker`), with the backbone's own
config nested under `backbone`, so `AutoModel.from_pretrained(dir)` rebuilds the whole model in one call.
"""

from __future__ import annotations

from typing import Any

from huggingface_hub.dataclasses import strict
from transformers import AutoConfig, PreTrainedConfig
from transformers.configuration_utils import SubConfigSpec
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
)

MODEL_TYPE = "vela_reranker"
# encoder: `[CLS] q [SEP] d [SEP]`; causal and mamba: `document: {d}\n\nquery: {q}[EOS]` (RankMamba §3.1).
FAMILIES = ("encoder", "causal", "mamba")
POOLINGS = ("cls", "eos")
# Bidirectional models read the whole pair from [CLS]; a unidirectional model has seen everything only at
# its last token, so it scores from [EOS].
DEFAULT_POOLING = {"encoder": "cls", "causal": "eos", "mamba": "eos"}


def infer_family(backbone: PreTrainedConfig | dict[str, Any]) -> str:
    """The family of a backbone config: Mamba, a causal LM, or (default) a bidirectional encoder."""
    model_type = str(backbone.get("model_type") if isinstance(backbone, dict) else backbone.model_type)
    if model_type.startswith("mamba"):
        return "mamba"
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:  # BERT, RoBERTa: also have LM heads, still bidirectional
        return "encoder"
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal"
    return "encoder"


def check_settings(*, family: str, pooling: str | None, max_length: int, head_dropout: float) -> None:
    """ValueError for settings no reranker can score with. A plain function, so that `vela train reranker`
    refuses its flags with it before the backbone loads (a config's own validator raises huggingface_hub's
    validation error, which is no ValueError)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if not 8 <= max_length <= 32768:
        raise ValueError(f"max_length must be in [8, 32768], got {max_length}")
    if not 0.0 <= head_dropout < 1.0:
        raise ValueError(f"head_dropout must be in [0, 1), got {head_dropout}")


@strict
class RerankerConfig(PreTrainedConfig):
    r"""
    backbone (`PreTrainedConfig` or `dict`): config of the backbone (any `AutoModel` type; a dict needs `model_type`).
    family (`str`, defaults to `"encoder"`): input layout, one of `encoder`, `causal`, `mamba`.
    pooling (`str`, *optional*): `cls` or `eos`; unset: the family's own (`cls` for encoders, else `eos`).
    max_length (`int`, defaults to 512): tokens of one (q, d) input, special tokens included (FirstP truncation).
    head_dropout (`float`, defaults to 0.0): dropout before the linear scoring head.
    backbone_name_or_path (`str`, *optional*): where the backbone weights came from (LoRA checkpoints reload it).
    """

    model_type = MODEL_TYPE
    sub_configs_defaults = {"backbone": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    backbone: PreTrainedConfig | dict | None = None
    family: str = "encoder"
    pooling: str | None = None
    max_length: int = 512
    head_dropout: float = 0.0
    backbone_name_or_path: str | None = None

    def __post_init__(self, **kwargs: Any) -> None:
        if self.pooling is None:
            self.pooling = DEFAULT_POOLING.get(self.family, "cls")
        super().__post_init__(**kwargs)

    def validate_reranker(self) -> None:
        """Run by `@strict` after init: refuse a config that could not score anything sensibly."""
        check_settings(
            family=self.family, pooling=self.pooling, max_length=self.max_length, head_dropout=self.head_dropout
        )

    @property
    def hidden_size(self) -> int:
        assert isinstance(self.backbone, PreTrainedConfig)
        return int(self.backbone.hidden_size)

    def get_text_config(self, *args: Any, **kwargs: Any) -> PreTrainedConfig:
        # The backbone holds the vocabulary and special tokens that transformers' checks look for.
        assert isinstance(self.backbone, PreTrainedConfig)
        return self.backbone.get_text_config(*args, **kwargs)


__all__ = ["FAMILIES", "MODEL_TYPE", "POOLINGS", "RerankerConfig", "check_settings", "infer_family"]
