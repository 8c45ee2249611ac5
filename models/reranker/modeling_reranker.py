"""A cross-encoder f(q, d) -> s: any Hugging Face backbone, one pooled state, a linear head (RankMamba §3.1).

The backbone is the bare `AutoModel` of its config (BertModel, LlamaModel, GPT2Model, MambaModel...), so
one class covers encoder-only, decoder-only and Mamba rerankers; the config says which state is read.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput

from models.reranker.configuration_reranker import RerankerConfig, infer_family


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """The state the head reads: the first token ([CLS]) or the last real one ([EOS]), per row."""
    if pooling == "cls":
        return hidden[:, 0]  # (B, d): encoders pad on the right, so position 0 is always [CLS]
    # Last position whose mask is 1, whichever side the padding is on.
    mask = attention_mask.to(hidden.device)  # (B, L)
    last = mask.size(1) - 1 - mask.flip(1).argmax(1)  # (B,)
    return hidden[torch.arange(hidden.size(0), device=hidden.device), last]  # (B, d)


class RerankerPreTrainedModel(PreTrainedModel):
    config_class = RerankerConfig
    config: RerankerConfig
    base_model_prefix = "reranker"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        # The backbone, a PreTrainedModel of its own, is initialised by its own _init_weights; only the
        # scoring head reaches here. Small weights and a zero bias: every pair starts near score 0.
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                init.zeros_(module.bias)


class RerankerModel(RerankerPreTrainedModel):
    """Scores (q, d) inputs made by `RerankerProcessor`; `logits` is one relevance score per row."""

    def __init__(self, config: RerankerConfig) -> None:
        super().__init__(config)
        self.backbone = AutoModel.from_config(config.backbone)
        self.dropout = nn.Dropout(config.head_dropout)
        self.head = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @classmethod
    def from_backbone(
        cls,
        backbone_dir: str | os.PathLike[str],
        *,
        family: str = "auto",
        pooling: str | None = None,
        max_length: int = 512,
        head_dropout: float = 0.0,
        **load_kwargs: Any,
    ) -> RerankerModel:
        """A new reranker over pretrained backbone weights, with a freshly initialised head."""
        backbone = AutoModel.from_pretrained(backbone_dir, local_files_only=True, **load_kwargs)
        config = RerankerConfig(
            backbone=backbone.config.to_dict(),
            family=infer_family(backbone.config) if family == "auto" else family,
            pooling=pooling,
            max_length=max_length,
            head_dropout=head_dropout,
            backbone_name_or_path=str(backbone_dir),
        )
        model = cls(config)
        model.backbone = backbone  # the pretrained weights replace the random ones built from the config
        return model

    def get_input_embeddings(self) -> nn.Module:
        return self.backbone.get_input_embeddings()  # type: ignore[no-any-return]

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.backbone.set_input_embeddings(value)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput:
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}  # (B, L) each
        if token_type_ids is not None and self.config.family == "encoder":
            inputs["token_type_ids"] = token_type_ids  # (B, L): query segment 0, document segment 1
        hidden = self.backbone(**inputs).last_hidden_state  # (B, L, d)
        pooled = pool(hidden, attention_mask, str(self.config.pooling))  # (B, d)
        logits = self.head(self.dropout(pooled).to(self.head.weight.dtype)).squeeze(-1)  # (B,)
        return SequenceClassifierOutput(logits=logits)


__all__ = ["RerankerModel", "RerankerPreTrainedModel", "pool"]
