"""Revela's in-batch attention: V-normalisation (Eq. 6) and Sim weighting (Eq. 7) against direct formulas, and
causality inside tiny Llama / Qwen2 / GPT-2 LMs running the registered attention function."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    LlamaConfig,
    PretrainedConfig,
    Qwen2Config,
)

from training.revela.attention import EPS, causal_attention, in_batch_attention, register, v_normalised_cross_attention

B, H, L, D = 3, 2, 5, 4
SCALE = D**-0.5


def _qkv(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(n, H, L, D, generator=g, dtype=torch.float64) for _ in range(3))  # type: ignore[return-value]


def _key_mask() -> torch.Tensor:
    mask = torch.ones(B, L, dtype=torch.bool)  # (B, L)
    mask[1, 3:] = False  # chunk 1 is right-padded
    return mask


def _direct_b_tilde(q_i: torch.Tensor, k_j: torch.Tensor, v_j: torch.Tensor, real_j: torch.Tensor, eps: float):
    """Eqs. 5-6 written out token by token: (H, L, D) each, real_j (L,) -> (H, L, D)."""
    out = torch.zeros_like(q_i)
    keys = real_j.nonzero().flatten().tolist()
    for h in range(H):
        for t in range(L):
            scores = torch.stack([q_i[h, t] @ k_j[h, u] * SCALE for u in keys])
            p = scores.softmax(0)  # full attention over chunk j's real tokens
            b = sum(p[n] * v_j[h, u] for n, u in enumerate(keys))
            norm = sum(p[n] * v_j[h, u].norm() for n, u in enumerate(keys))  # N_ij = softmax(.) ||V_j||_2
            out[h, t] = b / (norm + eps)
    return out


def test_v_normalisation_matches_the_direct_formula() -> None:
    q, k, v = _qkv(B)
    mask = _key_mask()
    got = v_normalised_cross_attention(q, k, v, mask, SCALE, EPS)  # (B, B, H, L, D)
    for i in range(B):
        for j in range(B):
            torch.testing.assert_close(got[i, j], _direct_b_tilde(q[i], k[j], v[j], mask[j], EPS))
    # eps <= 0 is the ablation: plain b_ij, the softmax-weighted values.
    plain = v_normalised_cross_attention(q, k, v, mask, SCALE, 0.0)
    p = ((q[0] @ k[1].transpose(-1, -2)) * SCALE).masked_fill(~mask[1], float("-inf")).softmax(-1)  # (H, L, L)
    torch.testing.assert_close(plain[0, 1], p @ v[1])


def test_one_hot_sim_gives_the_attention_over_that_chunk_alone() -> None:
    q, k, v = _qkv(2 * B, seed=1)
    mask = _key_mask()
    sim = torch.zeros(B, B, dtype=torch.float64)
    sim[0, 1] = sim[1, 2] = sim[2, 0] = 1.0  # chunk i attends to chunk target[i] only
    target = {0: 1, 1: 2, 2: 0}
    out = in_batch_attention(q, k, v, sim, mask, SCALE, EPS)  # (2B, H, L, D)
    # The e stream is the plain causal LM.
    torch.testing.assert_close(out[:B], causal_attention(q[:B], k[:B], v[:B], SCALE))
    s = causal_attention(q[B:], k[B:], v[B:], SCALE)  # (B, H, L, D)
    for i, j in target.items():
        torch.testing.assert_close(out[B + i] - s[i], _direct_b_tilde(q[B + i], k[j], v[j], mask[j], EPS))
    # Changing any other chunk's e-stream keys and values leaves h_0 (which weighs only chunk 1) unchanged.
    k2, v2 = k.clone(), v.clone()
    k2[2], v2[2] = torch.randn_like(k[2]), torch.randn_like(v[2])
    again = in_batch_attention(q, k2, v2, sim, mask, SCALE, EPS)
    torch.testing.assert_close(again[B + 0], out[B + 0])
    assert not torch.allclose(again[B + 1], out[B + 1])  # h_1 weighs chunk 2: it does change


def _tiny(kind: str, vocab: int = 64) -> PretrainedConfig:
    if kind == "gpt2":
        return GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    cls = LlamaConfig if kind == "llama" else Qwen2Config
    return cls(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention, as Llama 3 and Qwen2.5
        max_position_embeddings=64,
    )


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gpt2"])
def test_no_token_sees_a_later_token_of_its_own_chunk(kind: str) -> None:
    torch.manual_seed(0)
    config = _tiny(kind)
    config._attn_implementation = "sdpa"
    plain = AutoModelForCausalLM.from_config(config).eval()
    lm = AutoModelForCausalLM.from_config(config).eval()
    lm.load_state_dict(plain.state_dict())
    lm.set_attn_implementation(register())
    b, length, p = 4, 8, 5
    ids = torch.randint(0, 64, (b, length))  # (B, L)
    mask = torch.ones(b, length, dtype=torch.bool)
    mask[2, 6:] = False  # chunk 2 is right-padded
    sim = torch.rand(b, b).fill_diagonal_(0)
    sim = sim / sim.sum(-1, keepdim=True)  # (B, B) rows sum to 1 over j != i

    def logits(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return lm(input_ids=torch.cat([x, x]), revela_sim=sim, revela_key_mask=mask).logits  # (2B, L, V)

    before = logits(ids)
    changed = ids.clone()
    changed[0, p] = (ids[0, p] + 1) % 64
    after = logits(changed)
    for row in (0, b):  # chunk 0 in the e stream and in the h stream
        torch.testing.assert_close(after[row, :p], before[row, :p])  # nothing before p moved
        assert not torch.allclose(after[row, p:], before[row, p:])
    # The other chunks' h streams read all of chunk 0 (full cross-document attention), by design.
    assert not torch.allclose(after[b + 1, :p], before[b + 1, :p])
    # Pads are invisible: new ids in chunk 2's padding move no real token of any chunk, in either stream.
    repadded = ids.clone()
    repadded[2, 6:] = (ids[2, 6:] + 7) % 64
    real = torch.cat([mask, mask])  # (2B, L)
    torch.testing.assert_close(logits(repadded)[real], before[real])
    # The e stream is exactly the plain LM, and a call without Sim is plain causal attention.
    with torch.no_grad():
        torch.testing.assert_close(before[:b], plain(input_ids=ids).logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(lm(input_ids=ids).logits, plain(input_ids=ids).logits, atol=1e-5, rtol=1e-5)
