"""MoE / contrastive training pieces: hard-negative mining, consistency filtering, the Matryoshka loss, the
hard-negative collator, gradient caching with the load-balancing loss, and `vela train moe` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from models import EmbedderConfig, load_embedder
from models.moe import MoeModel
from tests.tiny_models import minilm_tokenizer, save_tiny_bert, write_topic_corpus
from training.contrastive.collator import HardNegativeCollator
from training.contrastive.dataset import PairDataset
from training.data.hard_negatives import BM25Teacher, DocumentPool, build_pool, mine, positive_aware_threshold
from training.data.pairs import Pair
from training.grad_cache import cached_step
from training.losses.infonce import InfoNCELoss
from training.losses.matryoshka import MatryoshkaInfoNCELoss, resolve_dims
from training.moe.trainer import MoeBiEncoder

PAIRS = [Pair("q0", "doc a", "q0", "a"), Pair("q0", "doc b", "q0", "b"), Pair("q1", "doc c", "q1", "c")]


class FixedTeacher:
    """Scores fixed per query text, over a pool of a, b, c and four more documents."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def scores(self, queries: list[str]) -> np.ndarray:
        return np.asarray([self.table[q] for q in queries], np.float32)


def _pool() -> DocumentPool:
    return DocumentPool(["a", "b", "c", "x", "y", "z", "w"], ["doc a", "doc b", "doc c", "x", "y", "z", "w"])


def test_positive_aware_mining_keeps_negatives_below_the_margin_and_never_a_positive() -> None:
    #            a     b     c     x     y     z     w
    q0 = [0.80, 0.60, 0.79, 0.77, 0.70, 0.10, 0.50]
    q1 = [0.90, 0.20, 0.50, 0.49, 0.30, 0.20, 0.10]
    mined = mine(PAIRS, _pool(), FixedTeacher({"q0": q0, "q1": q1}), hard_negatives=2, margin=0.95)
    # Pair 0 (pos a, 0.80): threshold 0.76; c (0.79) and x (0.77) are likely false negatives; b is a positive.
    assert mined.negatives[0].tolist() == [4, 6]  # y 0.70, w 0.50
    # Pair 1 (pos b, 0.60): threshold 0.57, so y (0.70) is out too; a, the same query's other positive, never in.
    assert mined.negatives[1].tolist() == [6, 5]
    # Pair 2 (pos c, 0.50): threshold 0.475; a (0.90) and x (0.49) are above it.
    assert mined.negatives[2].tolist() == [4, 1]
    assert mined.filled.tolist() == [0, 0, 0] and mined.keep.all()
    # Without the margin (1.0) the top-scored non-positives are taken, as plain top-k mining does.
    plain = mine(PAIRS, _pool(), FixedTeacher({"q0": q0, "q1": q1}), hard_negatives=2, margin=1.0)
    assert plain.negatives[0].tolist() == [2, 3]
    np.testing.assert_allclose(positive_aware_threshold(np.array([0.8, -0.5]), 0.95), [0.76, -0.525])


def test_too_few_below_the_threshold_are_filled_with_random_non_positives() -> None:
    q = {"q0": [0.5, 0.5, 0.9, 0.9, 0.9, 0.9, 0.1], "q1": [0.0] * 7}
    mined = mine(PAIRS[:1], _pool(), FixedTeacher(q), hard_negatives=3, margin=0.95, seed=0)
    assert mined.negatives[0][0] == 6 and mined.filled[0] == 2
    assert not {0, 1} & set(mined.negatives[0].tolist())  # a and b are q0's positives


def test_consistency_filtering_keeps_pairs_whose_document_is_in_the_teacher_top_k() -> None:
    q0 = [0.9, 0.1, 0.2, 0.3, 0.8, 0.0, 0.0]  # a is 1st; b is behind c, x, y (other positive a not counted)
    q1 = [0.0, 0.0, 0.5, 0.6, 0.0, 0.0, 0.0]  # c is 2nd
    mined = mine(PAIRS, _pool(), FixedTeacher({"q0": q0, "q1": q1}), consistency_top_k=2)
    assert mined.keep.tolist() == [True, False, True]
    assert mined.negatives.shape == (3, 0)


def test_bm25_teacher_mines_lexical_neighbours() -> None:
    pairs = [Pair("insulin resistance in mice", "insulin resistance of obese mice", "q", "d0")]
    pool = build_pool(pairs)
    pool = DocumentPool(
        pool.doc_ids + ["d1", "d2", "d3"],
        pool.texts + ["insulin secretion in mice", "volcanic eruptions", "mice running"],
    )
    mined = mine(pairs, pool, BM25Teacher(pool), hard_negatives=2, consistency_top_k=1)
    assert mined.keep.tolist() == [True]
    assert [pool.doc_ids[i] for i in mined.negatives[0]] == ["d1", "d3"]  # the unrelated d2 is not mined


def test_matryoshka_loss_is_the_mean_infonce_over_renormalised_prefixes() -> None:
    torch.manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(4, 32), dim=-1)
    d = torch.nn.functional.normalize(torch.randn(10, 32), dim=-1)  # 4 positives + 6 extra negatives
    assert resolve_dims([256, 16, 8, 0], 32) == (32, 16, 8)
    got = MatryoshkaInfoNCELoss([16, 256], temperature=0.05)(q, d)
    base = InfoNCELoss(0.05)

    def cut(x: torch.Tensor, m: int) -> torch.Tensor:
        return x[:, :m] / x[:, :m].norm(dim=-1, keepdim=True)

    torch.testing.assert_close(got, (base(q, d) + base(cut(q, 16), cut(d, 16))) / 2)


def test_collator_appends_own_hard_negatives_and_masks_the_others() -> None:
    pairs = [Pair(f"query {i}", f"document {i}", f"q{i}", f"d{i}") for i in range(3)]
    pool = DocumentPool([f"n{i}" for i in range(6)], [f"negative {i}" for i in range(6)])
    from training.data.hard_negatives import Mined

    mined = Mined(np.ones(3, bool), np.arange(6).reshape(3, 2), np.zeros(3, np.int64), pool)
    data = PairDataset(pairs, np.eye(3, 4, dtype=np.float32), np.eye(3, 4, dtype=np.float32))
    coll = HardNegativeCollator(data, minilm_tokenizer(), EmbedderConfig(), 16, 16, 0.05, mined=mined)
    batch = coll([2, 0])
    assert batch["documents"]["input_ids"].shape[0] == 2 + 4
    tok = minilm_tokenizer()
    texts = tok.batch_decode(batch["documents"]["input_ids"], skip_special_tokens=True)
    assert texts == ["document 2", "document 0", "negative 4", "negative 5", "negative 0", "negative 1"]
    want = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 0, 0]], dtype=torch.bool)
    assert torch.equal(batch["exclude"], want)


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("dense"), layers=4)


def test_gradient_cache_equals_the_plain_step_with_the_balance_loss(dense_dir: Path) -> None:
    from training.moe.trainer import MoeTrainer

    torch.manual_seed(0)
    backbone = MoeModel.upcycle(dense_dir, num_experts=4, top_k=2, router_aux_loss_coef=0.5)
    for m in backbone.modules():  # dropout off: a chunked forward draws other masks than a whole-batch one
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    with torch.no_grad():  # experts apart, so routing and the router's gradient matter
        for b in backbone.blocks():
            b.w_in.add_(torch.randn_like(b.w_in) * 0.1)
    model = MoeBiEncoder(backbone, EmbedderConfig()).train()
    tok = minilm_tokenizer()

    def enc(texts: list[str]) -> dict[str, torch.Tensor]:
        b = tok(texts, padding=True, return_tensors="pt")
        return {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}

    inputs = {
        "queries": enc([f"query {i} about topic {i % 3}" for i in range(4)]),
        "documents": enc([f"document {i} " + "with words " * (i % 4 + 1) for i in range(8)]),  # 4 + 4 negatives
        "exclude": torch.zeros(4, 8, dtype=torch.bool),
    }
    loss_fn = MatryoshkaInfoNCELoss([16], 0.05)
    trainer = MoeTrainer.__new__(MoeTrainer)  # only compute_loss: no Trainer set-up needed
    trainer.loss_fn, trainer._aux = loss_fn, []
    plain = trainer.compute_loss(model, inputs)
    plain.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    assert any("router" in n for n in want)
    model.zero_grad()
    cached, aux = cached_step(model, inputs, loss_fn.compute_loss_from_embeddings, 3)
    torch.testing.assert_close(cached, plain.detach())
    assert float(aux) > 0 and trainer._aux and abs(trainer._aux[0] - float(aux)) < 1e-5
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert set(got) == set(want)
    for n in want:
        torch.testing.assert_close(got[n], want[n], atol=2e-5, rtol=1e-4, msg=n)


def test_gradient_cache_serves_the_dense_bi_encoder_too(dense_dir: Path) -> None:
    from transformers import AutoModel

    from training.contrastive.trainer import BiEncoder

    backbone = AutoModel.from_pretrained(dense_dir)
    for m in backbone.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model = BiEncoder(backbone, EmbedderConfig()).train()
    tok = minilm_tokenizer()
    q = dict(tok([f"query {i}" for i in range(4)], padding=True, return_tensors="pt", return_token_type_ids=False))
    d = dict(
        tok([f"doc {i} " * (i + 1) for i in range(6)], padding=True, return_tensors="pt", return_token_type_ids=False)
    )
    inputs = {"queries": q, "documents": d}
    loss_fn = MatryoshkaInfoNCELoss([8], 0.05).compute_loss_from_embeddings
    plain = loss_fn(model(**q), model(**d))
    plain.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    cached, aux = cached_step(model, inputs, loss_fn, 4)
    torch.testing.assert_close(cached, plain.detach())
    assert float(aux) == 0.0
    for n, p in model.named_parameters():
        if n in want:
            torch.testing.assert_close(p.grad, want[n], atol=2e-5, rtol=1e-4, msg=n)


def test_train_moe_cli_writes_a_matryoshka_moe_embedder_that_loads_in_one_call(dense_dir: Path, tmp_path: Path) -> None:
    from training.moe.cli import main

    out = tmp_path / "out"
    argv = [
        "--out", str(out), "--model", str(dense_dir), "--surrogate", str(dense_dir),
        "--pairs", f"mine:{write_topic_corpus(tmp_path / 'corpus')}", "--batch_size", "4", "--max_steps", "2",
        "--doc_max_length", "32", "--logging_steps", "1", "--num_experts", "4", "--matryoshka_dims", "16", "32",
        "--hard_negatives", "2", "--consistency_top_k", "5",
        "--grad_cache", "true", "--grad_cache_chunk", "3",
    ]  # fmt: skip
    assert main(argv) == 0
    emb = load_embedder(out)
    assert isinstance(emb.model, MoeModel) and emb.model.config.num_experts == 4
    assert json.loads((out / "vela_embedder.json").read_text())["matryoshka_dims"] == [32, 16]
    counts = json.loads((out / "parameter_counts.json").read_text())
    assert counts == emb.model.parameter_counts() and counts["active"] < counts["total"]
    record = json.loads((out / "training_args.json").read_text())
    assert record["steps"] == 2 and record["recipe_args"]["hard_negatives"] == 2
    vecs = emb.encode_queries(["insulin study"])
    assert vecs.shape == (1, 32) and np.isclose(np.linalg.norm(vecs), 1.0, atol=1e-5)


def test_train_contrastive_cli_takes_hard_negatives_and_matryoshka(dense_dir: Path, tmp_path: Path) -> None:
    from training.contrastive.cli import main

    out = tmp_path / "out"
    argv = [
        "--out", str(out), "--model", str(dense_dir), "--surrogate", str(dense_dir),
        "--pairs", f"mine:{write_topic_corpus(tmp_path / 'corpus')}", "--batch_size", "4", "--max_steps", "1",
        "--doc_max_length", "32", "--matryoshka_dims", "8", "--hard_negatives", "1",
    ]  # fmt: skip
    assert main(argv) == 0
    assert load_embedder(out).config.matryoshka_dims == (32, 8)
