"""A BERT-family encoder with sparse MoE feed-forward blocks, upcycled from a dense checkpoint.

An MoE block replaces a layer's two FFN matrices (`intermediate.dense`, `output.dense`); the layer's dropout,
residual and LayerNorm stay as they are. A router scores the E experts per token; each token goes to its top-k
(softmax probabilities, renormalised over the k chosen when k > 1; the raw probability for k = 1, as in Switch,
so the router still learns from the main loss). Tokens are sorted by expert and each expert runs once over its
group: a loop over the E experts, never over tokens.

Load balancing (Eq. 1): L = alpha * sum_i r_i * p_i, r_i the fraction of (real, non-padding) token-to-expert
assignments that went to expert i and p_i the mean router probability of expert i; averaged over MoE blocks.
Each block reports sufficient statistics (counts, probability sums, tokens) so that the same loss can be summed
over chunks of a batch exactly (gradient caching: see `balance_loss`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.utils import ModelOutput

from models.moe.configuration_moe import MoeConfig


class MoeFeedForward(nn.Module):
    """Router + E experts, each expert W_out act(W_in x + b_in) + b_out, weights stacked (E, ...)."""

    def __init__(self, hidden: int, intermediate: int, act: str, num_experts: int, top_k: int) -> None:
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.router = nn.Linear(hidden, num_experts, bias=False)
        # nn.Linear layout per expert, so a dense FFN copies in without transposes.
        self.w_in = nn.Parameter(torch.empty(num_experts, intermediate, hidden))  # (E, f, d)
        self.b_in = nn.Parameter(torch.zeros(num_experts, intermediate))  # (E, f)
        self.w_out = nn.Parameter(torch.empty(num_experts, hidden, intermediate))  # (E, d, f)
        self.b_out = nn.Parameter(torch.zeros(num_experts, hidden))  # (E, d)
        self.act = ACT2FN[act]
        # Set by MoeModel.forward for one call: which tokens are real (padding is left out of the statistics).
        self.token_mask: torch.Tensor | None = None
        self.stats: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def expert_parameters(self) -> int:
        """Parameters of one expert."""
        return sum(p[0].numel() for p in (self.w_in, self.b_in, self.w_out, self.b_out))

    def upcycle_from(self, intermediate: nn.Linear, output: nn.Linear) -> None:
        """Every expert a copy of the dense FFN (Komatsuzaki et al.); the router keeps its fresh init."""
        with torch.no_grad():
            self.w_in.copy_(intermediate.weight.unsqueeze(0).expand_as(self.w_in))
            self.b_in.copy_(intermediate.bias.unsqueeze(0).expand_as(self.b_in))
            self.w_out.copy_(output.weight.unsqueeze(0).expand_as(self.w_out))
            self.b_out.copy_(output.bias.unsqueeze(0).expand_as(self.b_out))

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (T, d) -> probabilities (T, E), chosen experts (T, k), their gate weights (T, k)."""
        probs = self.router(x).float().softmax(-1)  # (T, E)
        top_p, top_i = probs.topk(self.top_k, dim=-1)  # (T, k)
        gates = top_p / top_p.sum(-1, keepdim=True) if self.top_k > 1 else top_p  # (T, k)
        return probs, top_i, gates

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])  # (T, d)
        probs, top_i, gates = self.route(x)
        flat_e = top_i.reshape(-1)  # (T*k,)
        order = flat_e.argsort(stable=True)  # (T*k,): assignments grouped by expert
        token_of = order // self.top_k  # (T*k,)
        counts = torch.bincount(flat_e, minlength=self.num_experts)  # (E,)
        grouped = x[token_of]  # (T*k, d)
        outs = []
        for e, part in enumerate(grouped.split(counts.tolist())):  # one pass per expert over its tokens
            if part.shape[0]:
                h = self.act(nn.functional.linear(part, self.w_in[e], self.b_in[e]))  # (n_e, f)
                outs.append(nn.functional.linear(h, self.w_out[e], self.b_out[e]))  # (n_e, d)
        # Under autocast the experts answer in bf16 while the residual stream stays fp32: add in the stream's dtype.
        y = torch.cat(outs).to(x.dtype) * gates.reshape(-1)[order].unsqueeze(-1).to(x.dtype)  # (T*k, d)
        out = torch.zeros_like(x).index_add_(0, token_of, y)  # (T, d): sum over each token's k experts
        self._record(probs, top_i)
        return out.reshape(shape)

    def _record(self, probs: torch.Tensor, top_i: torch.Tensor) -> None:
        mask = self.token_mask
        real = torch.ones(probs.shape[0], device=probs.device) if mask is None else mask.reshape(-1).to(probs)  # (T,)
        one_hot = nn.functional.one_hot(top_i, self.num_experts).sum(1).to(probs)  # (T, E)
        counts = (one_hot * real.unsqueeze(-1)).sum(0).detach()  # (E,): r_i carries no gradient
        prob_sum = (probs * real.unsqueeze(-1)).sum(0)  # (E,)
        self.stats = (counts, prob_sum, real.sum().detach())


def balance_loss(
    counts: torch.Tensor, prob_sum: torch.Tensor, tokens: torch.Tensor, *, top_k: int, alpha: float
) -> torch.Tensor:
    """Eq. 1 averaged over blocks: counts, prob_sum (n_blocks, E); tokens (n_blocks,).

    Linear in prob_sum once counts and tokens are fixed: with a whole batch's counts and tokens, the losses of its
    chunks' prob_sums add up to the whole batch's loss (what gradient caching needs)."""
    t = tokens.clamp(min=1.0).unsqueeze(-1)  # (n, 1)
    r = counts / (t * top_k)  # (n, E): fractions of assignments, sum 1 per block
    p = prob_sum / t  # (n, E): mean router probability
    return alpha * (r * p).sum(-1).mean()


@dataclass
class MoeModelOutput(ModelOutput):
    last_hidden_state: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None  # alpha * Eq. 1 for this call (or against `balance_stats` if given)
    router_counts: torch.Tensor | None = None  # (n_blocks, E) token-to-expert assignments, real tokens only
    router_tokens: torch.Tensor | None = None  # (n_blocks,) real tokens seen by each block


class MoeModel(PreTrainedModel):
    config_class = MoeConfig
    base_model_prefix = "moe"
    supports_gradient_checkpointing = True

    def __init__(self, config: MoeConfig) -> None:
        super().__init__(config)
        enc = config.encoder
        if not isinstance(enc, PreTrainedConfig):
            raise ValueError("a MoeConfig needs an encoder (backbone) config")
        self.encoder = AutoModel.from_config(enc)
        layers = _layers(self.encoder)
        d, f = int(enc.hidden_size), int(getattr(enc, "intermediate_size"))  # noqa: B009
        act = str(getattr(enc, "hidden_act", "gelu"))
        self.moe_layers = config.layers
        for i in self.moe_layers:
            # The MoE block returns the FFN's output; output.dense becomes the identity so the layer's own
            # dropout + residual + LayerNorm run unchanged after it.
            layer: Any = layers[i]
            layer.intermediate = MoeFeedForward(d, f, act, config.num_experts, config.top_k)
            layer.output.dense = nn.Identity()
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, MoeFeedForward):
            std = float(getattr(self.config.encoder, "initializer_range", 0.02))
            for p in (module.router.weight, module.w_in, module.w_out):
                init.normal_(p, mean=0.0, std=std)
            init.zeros_(module.b_in)
            init.zeros_(module.b_out)
        elif not isinstance(module, MoeModel):
            self.encoder._init_weights(module)

    def blocks(self) -> list[MoeFeedForward]:
        layers = _layers(self.encoder)
        blocks = [getattr(layers[i], "intermediate") for i in self.moe_layers]  # noqa: B009
        assert all(isinstance(b, MoeFeedForward) for b in blocks)
        return blocks

    def parameter_counts(self) -> dict[str, int]:
        """total: every parameter; active: those one token uses (k of the E experts per MoE block)."""
        total = sum(p.numel() for p in self.parameters())
        idle = sum((b.num_experts - b.top_k) * b.expert_parameters() for b in self.blocks())
        return {"total": total, "active": total - idle}

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        balance_stats: tuple[torch.Tensor, torch.Tensor] | None = None,
        **kwargs: object,
    ) -> MoeModelOutput:
        """balance_stats: (counts (n_blocks, E), tokens (n_blocks,)) of a whole batch this call is one chunk of;
        the aux loss then uses them in place of this call's own (see `balance_loss`)."""
        blocks = self.blocks()
        for b in blocks:
            b.token_mask = attention_mask
        try:
            hidden = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                position_ids=position_ids,
                inputs_embeds=inputs_embeds,
            ).last_hidden_state  # (B, L, d)
        finally:
            for b in blocks:
                b.token_mask = None
        if not blocks:
            return MoeModelOutput(last_hidden_state=hidden)
        stats = [b.stats for b in blocks]
        for b in blocks:
            b.stats = None  # handed over: the blocks keep no graph alive between calls
        assert all(s is not None for s in stats)
        counts = torch.stack([s[0] for s in stats if s is not None])  # (n, E)
        prob_sum = torch.stack([s[1] for s in stats if s is not None])  # (n, E)
        tokens = torch.stack([s[2] for s in stats if s is not None])  # (n,)
        ref_counts, ref_tokens = balance_stats if balance_stats is not None else (counts, tokens)
        aux = balance_loss(
            ref_counts, prob_sum, ref_tokens, top_k=self.config.top_k, alpha=self.config.router_aux_loss_coef
        )
        return MoeModelOutput(last_hidden_state=hidden, aux_loss=aux, router_counts=counts, router_tokens=tokens)

    @classmethod
    def upcycle(
        cls,
        dense: str | os.PathLike[str] | PreTrainedModel,
        *,
        num_experts: int = 8,
        top_k: int = 2,
        moe_layers: list[int] | None = None,
        router_aux_loss_coef: float = 1.0,
    ) -> MoeModel:
        """A MoE model from a dense BERT-family encoder (a directory or a loaded model): every weight copied,
        each MoE block's experts copies of that layer's FFN, fresh routers."""
        if not isinstance(dense, PreTrainedModel):
            dense = AutoModel.from_pretrained(dense, local_files_only=True)
        assert isinstance(dense, PreTrainedModel)
        enc_cfg: PreTrainedConfig = dense.config
        config = MoeConfig.from_encoder(
            enc_cfg,
            num_experts=num_experts,
            top_k=top_k,
            moe_layers=moe_layers,
            router_aux_loss_coef=router_aux_loss_coef,
        )
        model = cls(config)
        missing, unexpected = model.encoder.load_state_dict(dense.state_dict(), strict=False)
        moe_keys = ("intermediate.router", "intermediate.w_", "intermediate.b_")
        if bad := [k for k in missing if not any(m in k for m in moe_keys)]:
            raise ValueError(f"dense checkpoint lacks weights the MoE model needs: {bad[:5]}")
        dense_layers: Any = _layers(dense)
        for i, block in zip(model.moe_layers, model.blocks(), strict=True):
            block.upcycle_from(dense_layers[i].intermediate.dense, dense_layers[i].output.dense)
        return model


def _layers(encoder: nn.Module) -> nn.ModuleList:
    """The transformer layers of a BERT-family model (BERT, RoBERTa, XLM-R, ELECTRA: `encoder.layer`)."""
    layers = getattr(getattr(encoder, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or not all(
        hasattr(layer, "intermediate") and hasattr(layer, "output") for layer in layers
    ):
        raise ValueError(f"{type(encoder).__name__} is not a BERT-family encoder (encoder.layer[i].intermediate)")
    return layers
