"""The upcycled MoE encoder: routing, the load-balancing loss, parameter counts, save/load, Matryoshka truncation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from huggingface_hub.errors import StrictDataclassClassValidationError
from transformers import AutoModel

from models import load_embedder
from models.embedder.modeling_embedder import truncate_embeddings
from models.moe import MoeConfig, MoeFeedForward, MoeModel, balance_loss
from tests.tiny_models import save_tiny_bert


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("dense"), layers=4)


def _inputs() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    ids = torch.randint(1000, 2000, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[0, 6:] = 0
    mask[2, 4:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _spread_experts(model: MoeModel) -> None:
    """Make experts differ (as training does) so routing matters."""
    with torch.no_grad():
        for b in model.blocks():
            b.w_in.add_(torch.randn_like(b.w_in) * 0.1)
            b.b_out.add_(torch.randn_like(b.b_out) * 0.1)


def test_upcycling_converts_alternate_layers_and_preserves_the_dense_function(dense_dir: Path) -> None:
    dense = AutoModel.from_pretrained(dense_dir).eval()
    moe = MoeModel.upcycle(dense_dir, num_experts=4, top_k=2).eval()
    assert moe.moe_layers == [1, 3]  # every second FFN, starting from the second layer
    for i, layer in enumerate(moe.encoder.encoder.layer):
        assert isinstance(layer.intermediate, MoeFeedForward) == (i in (1, 3))
    block, dense_layer = moe.blocks()[0], dense.encoder.layer[1]
    for e in range(4):  # each expert a copy of the dense FFN
        assert torch.equal(block.w_in[e], dense_layer.intermediate.dense.weight)
        assert torch.equal(block.w_out[e], dense_layer.output.dense.weight)
    with torch.no_grad():
        want = dense(**_inputs()).last_hidden_state
        got = moe(**_inputs()).last_hidden_state
    # Identical experts and top-2 gates renormalised to sum 1: the upcycled model starts as the dense one.
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_parameter_counts_total_and_active(dense_dir: Path) -> None:
    dense = AutoModel.from_pretrained(dense_dir)
    moe = MoeModel.upcycle(dense, num_experts=4, top_k=2)
    d, f = 32, 64
    expert = d * f + f + f * d + d
    n_dense = sum(p.numel() for p in dense.parameters())
    counts = moe.parameter_counts()
    # Two MoE blocks: the dense FFN becomes 4 experts plus a router (d x E, no bias).
    assert counts["total"] == n_dense + 2 * (3 * expert + d * 4)
    assert counts["active"] == counts["total"] - 2 * 2 * expert
    switch = MoeModel.upcycle(dense, num_experts=4, top_k=1).parameter_counts()
    assert switch["active"] == n_dense + 2 * d * 4


@pytest.mark.parametrize("top_k", [1, 2])
def test_grouped_experts_equal_a_per_token_reference(top_k: int) -> None:
    torch.manual_seed(1)
    block = MoeFeedForward(8, 16, "gelu", num_experts=4, top_k=top_k)
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(2, 5, 8)  # (B, L, d)
    got = block(x)
    probs = torch.softmax(x.reshape(-1, 8) @ block.router.weight.T, -1)  # (T, E)
    want = []
    for t, tok in enumerate(x.reshape(-1, 8)):
        top_p, top_i = probs[t].topk(top_k)
        gates = top_p / top_p.sum() if top_k > 1 else top_p  # Switch keeps the raw probability
        y = sum(
            g * (block.act(tok @ block.w_in[e].T + block.b_in[e]) @ block.w_out[e].T + block.b_out[e])
            for g, e in zip(gates, top_i.tolist(), strict=True)
        )
        want.append(y)
    torch.testing.assert_close(got.reshape(-1, 8), torch.stack(want), atol=1e-5, rtol=1e-5)


def test_aux_loss_is_alpha_sum_r_p_over_real_tokens(dense_dir: Path) -> None:
    moe = MoeModel.upcycle(dense_dir, num_experts=4, top_k=2, router_aux_loss_coef=0.5).eval()
    _spread_experts(moe)
    inputs = _inputs()
    out = moe(**inputs)
    real = inputs["attention_mask"].reshape(-1).bool()
    assert torch.equal(out.router_tokens, torch.full((2,), float(real.sum())))
    assert torch.equal(out.router_counts.sum(-1), torch.full((2,), 2.0 * real.sum()))  # k assignments per token
    # Recompute Eq. 1 by hand from each block's router on its own input.
    want, block_inputs = [], {}
    hooks = [b.register_forward_hook(lambda m, a, o: block_inputs.__setitem__(m, a[0])) for b in moe.blocks()]
    moe(**inputs)
    for h in hooks:
        h.remove()
    for b in moe.blocks():
        x = block_inputs[b].reshape(-1, 32)[real]  # (T_real, d)
        probs = torch.softmax(b.router(x), -1)  # (T_real, E)
        chosen = torch.nn.functional.one_hot(probs.topk(2).indices, 4).sum(1).float()  # (T_real, E)
        r = chosen.mean(0) / 2
        want.append((r * probs.mean(0)).sum())
    torch.testing.assert_close(out.aux_loss, 0.5 * torch.stack(want).mean())
    # Perfect balance gives alpha / E, the minimum.
    uniform = torch.full((1, 4), 3.0)
    torch.testing.assert_close(
        balance_loss(uniform * 2, uniform, torch.tensor([12.0]), top_k=2, alpha=1.0), torch.tensor(0.25)
    )


def test_chunks_scored_against_the_whole_batch_counts_add_up_to_the_batch_loss(dense_dir: Path) -> None:
    moe = MoeModel.upcycle(dense_dir, num_experts=4, top_k=1).eval()
    _spread_experts(moe)
    inputs = _inputs()
    whole = moe(**inputs)
    parts = [{k: v[s] for k, v in inputs.items()} for s in (slice(0, 1), slice(1, 3))]
    stats = (whole.router_counts, whole.router_tokens)
    total = sum(moe(**p, balance_stats=stats).aux_loss for p in parts)
    torch.testing.assert_close(total, whole.aux_loss)


def test_config_validation() -> None:
    with pytest.raises(StrictDataclassClassValidationError, match="top_k"):
        MoeConfig(num_experts=2, top_k=3)
    with pytest.raises(ValueError, match="out of range"):
        MoeModel(MoeConfig(encoder={"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 32,
                                    "num_attention_heads": 2, "intermediate_size": 64}, moe_layers=[5]))  # fmt: skip


def test_saved_moe_loads_with_one_call_and_truncates_for_matryoshka(dense_dir: Path, tmp_path: Path) -> None:
    moe = MoeModel.upcycle(dense_dir, num_experts=4, top_k=2)
    _spread_experts(moe)
    moe.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "vela_embedder.json"):
        (tmp_path / name).write_bytes((dense_dir / name).read_bytes())
    again = AutoModel.from_pretrained(tmp_path)
    assert isinstance(again, MoeModel) and again.config.num_experts == 4
    emb = load_embedder(tmp_path)
    assert isinstance(emb.model, MoeModel) and emb.dim == 32
    texts = ["insulin resistance in mice", "graphene conducts heat"]
    full = emb.encode_documents(texts)
    np.testing.assert_allclose(np.linalg.norm(full, axis=1), 1.0, atol=1e-5)
    bf16 = load_embedder(tmp_path, precision="bf16").encode_documents(texts)  # autocast: bf16 experts, fp32 stream
    np.testing.assert_allclose(bf16, full, atol=0.05)
    cut = truncate_embeddings(torch.from_numpy(full), 16).numpy()
    np.testing.assert_allclose(cut, full[:, :16] / np.linalg.norm(full[:, :16], axis=1, keepdims=True), rtol=1e-5)
    with pytest.raises(ValueError):
        truncate_embeddings(torch.from_numpy(full), 64)
