"""The contextual document embedder: M1 embeds context documents, M2 embeds a text after those vectors.

phi(d; D) = M2(M1(d^1), ..., M1(d^J), E(d_1), ..., E(d_T))   (paper Eq. 5; queries the same, Eq. 6)

Context rows carry no position: M2 is called with `inputs_embeds` and explicit `position_ids`; text tokens keep
positions 0..T-1 (as without context, so a pretrained M2 starts where it was), and each context row has the
position embedding it is about to receive subtracted first, so what enters the LayerNorm is the context vector
plus the token-type embedding only. All rows are treated alike and attention is permutation-equivariant, so
permuting the context cannot change an embedding. Backbones with rotary positions are refused (see 10.4 of the
paper for what they would need).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel

from models.cde.configuration_cde import CdeConfig


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the non-padding tokens, then unit length (how M1 and M2 both pool)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)  # (B, d)
    return nn.functional.normalize(pooled.float(), dim=-1)


class CdeModel(PreTrainedModel):
    config_class = CdeConfig
    base_model_prefix = "cde"
    supports_gradient_checkpointing = True

    def __init__(self, config: CdeConfig) -> None:
        super().__init__(config)
        first, second = config.first_stage, config.second_stage
        if first is None or second is None:
            raise ValueError("a CdeConfig needs first_stage and second_stage backbone configs")
        self.first_stage = AutoModel.from_config(first)
        self.second_stage = AutoModel.from_config(second)
        emb = self.second_stage.get_input_embeddings()
        if not hasattr(self.second_stage.embeddings, "position_embeddings"):
            raise ValueError("CDE needs a second stage with absolute position embeddings (BERT family)")
        d1, d2 = int(getattr(first, "hidden_size")), int(getattr(second, "hidden_size"))  # noqa: B009
        # M1 and M2 of different widths meet through a projection; equal widths need none.
        self.context_projection: nn.Module = nn.Identity() if d1 == d2 else nn.Linear(d1, d2)
        # v_null: stands in for a missing context row (sequence dropout; no corpus at all).
        self.null_context = nn.Parameter(emb.weight.detach().mean(0).clone())  # (d2,)
        self.post_init()

    # Keep the pretrained backbones as they are when the model is built from them.
    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear) and module is getattr(self, "context_projection", None):
            nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)

    @property
    def hidden_size(self) -> int:
        return int(self.config.second_stage.hidden_size)  # type: ignore[union-attr]

    def embed_context(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """First stage: one unit vector per context document, (J, d1)."""
        out = self.first_stage(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (J, T, d1)
        return mean_pool(out, attention_mask)  # (J, d1)

    def context_rows(self, context: torch.Tensor | None, *, dropout_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The J rows M2 reads before the text: projected context vectors, or v_null where there are none.

        context: (J, d1) or None (plain bi-encoder: J null rows). dropout_mask: (J,) bool, True = use v_null.
        """
        j = self.config.corpus_context_size if context is None else context.shape[0]
        null = self.null_context.unsqueeze(0).expand(j, -1)  # (J, d2)
        if context is None:
            return null
        rows = self.context_projection(context.to(null.dtype))  # (J, d2)
        if dropout_mask is not None:
            rows = torch.where(dropout_mask.unsqueeze(-1), null, rows)
        return rows

    def sample_dropout_mask(self, j: int, device: torch.device) -> torch.Tensor | None:
        """Sequence dropout (training only): which of J rows become v_null this step."""
        p = self.config.sequence_dropout_prob
        if not self.training or p <= 0:
            return None
        return torch.rand(j, device=device) < p  # (J,)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        context: torch.Tensor | None = None,
        dropout_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Second stage: unit embeddings (B, d2) of the texts, pooled over text tokens only."""
        b, t = input_ids.shape
        rows = self.context_rows(context, dropout_mask=dropout_mask)  # (J, d2)
        j = rows.shape[0]
        embeddings = self.second_stage.embeddings
        words = embeddings.word_embeddings(input_ids)  # (B, T, d2)
        # Context rows get position id 0 and have P[0] subtracted: after the backbone adds it back they hold
        # no position at all.
        ctx = (rows - embeddings.position_embeddings.weight[0]).to(words.dtype)  # (J, d2)
        inputs = torch.cat([ctx.unsqueeze(0).expand(b, -1, -1), words], dim=1)  # (B, J+T, d2)
        text_pos = torch.arange(t, device=input_ids.device)  # (T,)
        positions = torch.cat([torch.zeros(j, dtype=torch.long, device=input_ids.device), text_pos])  # (J+T,)
        mask = torch.cat([attention_mask.new_ones(b, j), attention_mask], dim=1)  # (B, J+T)
        types = None
        if token_type_ids is not None:
            types = torch.cat([token_type_ids.new_zeros(b, j), token_type_ids], dim=1)  # (B, J+T)
        hidden = self.second_stage(
            inputs_embeds=inputs,
            attention_mask=mask,
            position_ids=positions.unsqueeze(0).expand(b, -1),
            token_type_ids=types,
        ).last_hidden_state  # (B, J+T, d2)
        return mean_pool(hidden[:, j:], attention_mask)  # (B, d2): text tokens only
