"""Revela's in-batch attention (paper Sec. 3.2, Eqs. 3-8) as an attention function registered with transformers.

The LM runs on a batch of 2B sequences: rows [0, B) are the chunks' ordinary stream e, rows [B, 2B) the same
chunks' in-batch stream h (Sec. 3.4: "duplicating documents"). Layer norms, MLPs and projections are shared, so
the only change is here, in the attention step of every layer:

    e_i = causal softmax(Q^e_i K^e_i^T / sqrt(d_H)) V^e_i                      (Eq. 4, the plain LM)
    s_i = causal softmax(Q^h_i K^h_i^T / sqrt(d_H)) V^h_i                      (h's own prefix)
    b~_ij = softmax(Q^h_i K^e_j^T / sqrt(d_H)) V^e_j / (N_ij + eps)            (Eqs. 5-6, full mask over chunk j)
    N_ij = softmax(Q^h_i K^e_j^T / sqrt(d_H)) ||V^e_j||_2                      (per token, per head)
    h_i = s_i + sum_{j != i} Sim_ij b~_ij                                     (Eqs. 7-8)

Nothing of transformers is forked: `register()` adds the function under the name "revela" and the LM is loaded
with `attn_implementation="revela"`. Llama, Qwen2 and GPT-2 hand every extra forward keyword down to their
attention function, so the similarity matrix and the key padding mask travel as `revela_sim` and
`revela_key_mask`. Without them (an ordinary call) the function is plain causal attention.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ATTENTION_NAME = "revela"
EPS = 1e-6


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Grouped-query attention (Llama, Qwen2): one key/value head serves `groups` query heads."""
    if groups == 1:
        return x
    n, h, length, d = x.shape  # (N, H_kv, L, d_H)
    return x[:, :, None].expand(n, h, groups, length, d).reshape(n, h * groups, length, d)  # (N, H, L, d_H)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float, dropout: float = 0.0):
    """q, k, v (N, H, L, d_H) -> (N, H, L, d_H). Right padding: a real token never reaches a later pad."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] == k.shape[2], scale=scaling, dropout_p=dropout)


def v_normalised_cross_attention(
    q_h: torch.Tensor, k_e: torch.Tensor, v_e: torch.Tensor, key_mask: torch.Tensor, scaling: float, eps: float = EPS
) -> torch.Tensor:
    """b~_ij of Eq. 6 for every ordered pair of chunks: chunk i's h-queries over all of chunk j's e-keys.

    q_h, k_e, v_e (B, H, L, d_H); key_mask (B, L), True on real tokens. Returns (B, B, H, L, d_H), [i, j] = b~_ij.
    eps <= 0 turns V-normalisation off (the paper's ablation, Sec. 5.3): plain b_ij.
    """
    b, h, length, d = q_h.shape
    # ||V^e_j||_2 rides along as one more value channel, so one softmax gives both b_ij and N_ij.
    norms = v_e.float().norm(dim=-1, keepdim=True).to(v_e.dtype)  # (B, H, L, 1)
    values = torch.cat([v_e, norms], dim=-1)  # (B, H, L, d_H + 1)
    q = q_h[:, None].expand(b, b, h, length, d).reshape(b * b, h, length, d)  # (B*B, H, L, d_H): row i*B+j is i
    k = k_e[None].expand(b, b, h, length, d).reshape(b * b, h, length, d)  # (B*B, H, L, d_H): ... and j
    v = values[None].expand(b, b, h, length, d + 1).reshape(b * b, h, length, d + 1)  # (B*B, H, L, d_H + 1)
    mask = key_mask.bool()[None, :, None, None, :].expand(b, b, 1, 1, length).reshape(b * b, 1, 1, length)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scaling)  # (B*B, H, L, d_H + 1), full mask
    out = out.view(b, b, h, length, d + 1)  # (B, B, H, L, d_H + 1)
    attended, n = out[..., :d], out[..., d:]  # b_ij (B, B, H, L, d_H), N_ij (B, B, H, L, 1)
    return attended / (n + eps) if eps > 0 else attended


def in_batch_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sim: torch.Tensor,
    key_mask: torch.Tensor,
    scaling: float,
    eps: float = EPS,
    dropout: float = 0.0,
) -> torch.Tensor:
    """q, k, v (2B, H, L, d_H), e stream first; sim (B, B) with a zero diagonal; key_mask (B, L) -> (2B, H, L, d_H)."""
    b = sim.shape[0]
    if q.shape[0] != 2 * b:
        raise ValueError(f"in-batch attention wants 2B = {2 * b} rows (e then h), got {q.shape[0]}")
    e = causal_attention(q[:b], k[:b], v[:b], scaling, dropout)  # (B, H, L, d_H), Eq. 4
    s = causal_attention(q[b:], k[b:], v[b:], scaling, dropout)  # (B, H, L, d_H)
    cross = v_normalised_cross_attention(q[b:], k[:b], v[:b], key_mask, scaling, eps)  # (B, B, H, L, d_H)
    mixed = torch.einsum("ij,ijhld->ihld", sim.to(cross.dtype), cross)  # (B, H, L, d_H), Eq. 7
    return torch.cat([e, s + mixed], dim=0)  # (2B, H, L, d_H), Eq. 8


def revela_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The AttentionInterface signature: query (N, H, L, d_H), key/value (N, H_kv, L, d_H) -> ((N, L, H, d_H), None).

    `attention_mask` is always None: transformers builds no mask for an implementation it has no mask function
    for, and the masks here (causal, full over another chunk's real tokens) are built from `revela_key_mask`.
    """
    groups = int(getattr(module, "num_key_value_groups", 1))
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)  # (N, H, L, d_H)
    scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
    sim = kwargs.get("revela_sim")
    if sim is None:
        out = causal_attention(query, key, value, scale, dropout)  # (N, H, L, d_H): an ordinary LM call
    else:
        key_mask = kwargs["revela_key_mask"]  # (B, L)
        eps = float(kwargs.get("revela_eps", EPS))
        out = in_batch_attention(query, key, value, sim, key_mask, scale, eps, dropout)  # (2B, H, L, d_H)
    return out.transpose(1, 2).contiguous(), None  # (N, L, H, d_H), as the models reshape it


def register() -> str:
    """Register the function (idempotent) and return the name to load an LM with."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, revela_attention_forward)
    return ATTENTION_NAME
