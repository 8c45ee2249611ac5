"""Condenser pretraining model: backbone MLM + Condenser-head MLM with one shared output projection.

    [h_cls^early; h^early] = Encoder_early(embeddings)            (Eq. 6)
    [h_cls^late;  h^late ] = Encoder_late([h_cls^early; h^early])  (Eq. 7)
    [h_cls^cd;    h^cd   ] = Head([h_cls^late; h^early])            (Eq. 8)
    L = CE(W h^cd, x) + CE(W h^late, x)   over masked positions     (Eq. 9-11)

The late layers can pass new information to the head only through the late CLS, so pretraining teaches the
CLS to aggregate the text. W is the backbone's MLM head (its decoder tied to the word embeddings); no MLM head
ships with the packaged encoders, so its transform starts random, like the Condenser head.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, PreTrainedModel
from transformers.masking_utils import create_bidirectional_mask
from transformers.utils import ModelOutput

from models.condenser.configuration_condenser import CondenserConfig


@dataclass
class CondenserOutput(ModelOutput):
    loss: torch.Tensor | None = None
    head_mlm_loss: torch.Tensor | None = None  # Eq. 9
    backbone_mlm_loss: torch.Tensor | None = None  # Eq. 10


class CondenserForPretraining(PreTrainedModel):
    config_class = CondenserConfig
    base_model_prefix = "condenser"

    def __init__(self, config: CondenserConfig) -> None:
        super().__init__(config)
        if config.backbone is None:
            raise ValueError("a CondenserConfig needs a backbone config")
        self.mlm = AutoModelForMaskedLM.from_config(config.backbone)  # backbone + the shared projection W
        if not hasattr(self.mlm.base_model, "encoder"):
            raise ValueError("Condenser needs a BERT-family backbone (an encoder with MLM head)")
        backbone = config.backbone if isinstance(config.backbone, dict) else config.backbone.to_dict()
        head_config = AutoConfig.for_model(**{**backbone, "num_hidden_layers": config.head_layers})
        self.head = AutoModel.from_config(head_config).encoder  # L^h fresh Transformer layers
        # BERT names its MLM head `cls`, RoBERTa-style models `lm_head`.
        self.mlm_head: nn.Module = getattr(self.mlm, "cls", None) or self.mlm.lm_head
        self.post_init()

    # The backbone and its MLM head initialise themselves; nothing here overrides what they loaded.
    def _init_weights(self, module: nn.Module) -> None:
        return

    @classmethod
    def from_backbone(
        cls, model_dir: str | os.PathLike[str], *, early_layers: int = 0, head_layers: int = 2, weight: float = 1.0
    ) -> CondenserForPretraining:
        """A Condenser around a pretrained encoder directory; head and MLM transform start random (3.4)."""
        encoder = AutoModel.from_pretrained(model_dir, local_files_only=True)
        config = CondenserConfig(
            backbone=encoder.config.to_dict(),  # type: ignore[arg-type]
            early_layers=early_layers,
            head_layers=head_layers,
            backbone_mlm_weight=weight,
        )
        model = cls(config)
        result = model.mlm.base_model.load_state_dict(encoder.state_dict(), strict=False)
        # An MLM model's backbone has no pooler; anything else missing means the weights did not fit.
        missed = [k for k in (*result.missing_keys, *result.unexpected_keys) if not k.startswith("pooler.")]
        if missed:
            raise ValueError(f"{model_dir}: backbone weights do not fit its MLM model: {missed[:5]}")
        model.tie_output_projection()
        return model

    def tie_output_projection(self) -> None:
        """W's decoder is the word-embedding matrix (tied, as BERT's MLM head)."""
        decoder = self.mlm.get_output_embeddings()
        decoder.weight = self.mlm.base_model.get_input_embeddings().weight

    def backbone(self) -> PreTrainedModel:
        """The encoder that remains once the head is dropped."""
        return self.mlm.base_model  # type: ignore[no-any-return]

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        labels: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> CondenserOutput:
        out = self.backbone()(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, output_hidden_states=True
        )
        early = out.hidden_states[self.config.resolved_early_layers]  # (B, L, d): after L^e layers
        late = out.last_hidden_state  # (B, L, d)
        head_in = torch.cat([late[:, :1], early[:, 1:]], dim=1)  # (B, L, d): late CLS, early tokens
        mask = create_bidirectional_mask(config=self.head.config, inputs_embeds=head_in, attention_mask=attention_mask)
        cd = self.head(head_in, attention_mask=mask).last_hidden_state  # (B, L, d)
        # Project only the masked positions: the vocabulary matmul over every token would dominate the step.
        picked = labels != -100  # (B, L)
        target = labels[picked]  # (M,)
        head_loss = self._mlm_loss(cd[picked], target)
        backbone_loss = self._mlm_loss(late[picked], target)
        loss = head_loss + self.config.backbone_mlm_weight * backbone_loss
        return CondenserOutput(loss=loss, head_mlm_loss=head_loss.detach(), backbone_mlm_loss=backbone_loss.detach())

    def _mlm_loss(self, states: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = self.mlm_head(states)  # (M, V): W, shared by both losses
        return F.cross_entropy(logits.float(), target)
