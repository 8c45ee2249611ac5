"""Cross-encoder rerankers of each backbone family: layouts, pooling, save/load in one call, the cache."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from models.reranker import (
    NotARerankerError,
    RerankerCache,
    RerankerConfig,
    RerankerModel,
    RerankerProcessor,
    load_reranker,
    resolve_reranker_dir,
)
from tests.reranker_fixtures import FAMILY_OF, make_backbone, make_reranker

KINDS = sorted(FAMILY_OF)
DOCS = ["Paris is the capital and largest city of France. " * 20, "The domestic cat is a small mammal.", "x"]


@pytest.fixture(scope="module")
def rerankers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rerankers")
    return {kind: make_reranker(kind, root / kind) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_family_and_pooling_follow_the_backbone(rerankers: dict[str, Path], kind: str) -> None:
    config = RerankerConfig.from_pretrained(rerankers[kind])
    assert config.family == FAMILY_OF[kind]
    assert config.pooling == ("cls" if kind == "bert" else "eos")
    assert config.max_length == 64 and config.backbone.model_type == kind


@pytest.mark.parametrize("kind", KINDS)
def test_saved_reranker_loads_in_one_call_with_the_same_scores(rerankers: dict[str, Path], kind: str) -> None:
    path = rerankers[kind]
    model = AutoModel.from_pretrained(path)
    assert isinstance(model, RerankerModel)
    encoder = load_reranker(path)
    scores = encoder.score("capital of France", DOCS)
    assert scores.shape == (3,) and scores.dtype == np.float32 and np.isfinite(scores).all()
    processor = RerankerProcessor(AutoTokenizer.from_pretrained(path), model.config)
    with torch.inference_mode():
        again = model.eval()(**processor(["capital of France"] * 3, DOCS)).logits.numpy()  # (3,)
    np.testing.assert_allclose(scores, again, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_padding_does_not_change_a_score(rerankers: dict[str, Path], kind: str) -> None:
    # The short pair is padded in a batch with the long one: CLS/EOS pooling must read the same state.
    encoder = load_reranker(rerankers[kind])
    together = encoder.score("capital of France", DOCS)
    alone = np.array([encoder.score("capital of France", [d])[0] for d in DOCS])
    np.testing.assert_allclose(together, alone, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["gpt2", "mamba"])
def test_causal_layout_is_document_then_query_then_eos(rerankers: dict[str, Path], kind: str) -> None:
    encoder = load_reranker(rerankers[kind])
    tok = encoder.processor.tokenizer
    batch = encoder.processor(["capital of France", "cat"], [DOCS[0], DOCS[1]])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert ids.shape[1] == 64  # the long document is cut to max_length
    query_ids = tok("\n\nquery: capital of France", add_special_tokens=False)["input_ids"]
    row = ids[0].tolist()
    assert row[-1] == tok.eos_token_id and row[-1 - len(query_ids) : -1] == query_ids  # the query survives the cut
    assert tok.decode(row).startswith("document: Paris")
    short = ids[1, : int(mask[1].sum())].tolist()
    assert short[-1] == tok.eos_token_id and tok.decode(short[:-1]).endswith("query: cat")
    assert mask[1, int(mask[1].sum()) :].sum() == 0  # right padding


def test_encoder_layout_is_cls_query_sep_document(rerankers: dict[str, Path]) -> None:
    encoder = load_reranker(rerankers["bert"])
    tok = encoder.processor.tokenizer
    batch = encoder.processor(["capital of France"], [DOCS[0]])
    row = batch["input_ids"][0].tolist()
    assert len(row) == 64 and row[0] == tok.cls_token_id and row[-1] == tok.sep_token_id
    assert tok.decode(row[1 : row.index(tok.sep_token_id)]) == "capital of france"
    assert batch["token_type_ids"][0, row.index(tok.sep_token_id) + 1] == 1  # the document is segment 1


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"family": "rnn"}, "family must be one of"),
        ({"pooling": "mean"}, "pooling must be one of"),
        ({"max_length": 4}, "max_length must be in"),
        ({"head_dropout": 1.0}, "head_dropout must be in"),
    ],
)
def test_config_refuses_bad_values(kwargs: dict, needle: str) -> None:
    with pytest.raises(Exception, match=needle):
        RerankerConfig(**kwargs)


def test_resolve_refuses_missing_and_non_reranker_dirs(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no config.json"):
        resolve_reranker_dir(tmp_path / "nope")
    with pytest.raises(NotARerankerError, match="not a reranker"):
        resolve_reranker_dir(tiny_embedder_dir)


def test_cache_loads_each_reranker_once_across_threads(rerankers: dict[str, Path]) -> None:
    cache = RerankerCache()
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(rerankers["bert"]))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got) and cache.loaded() == [str(rerankers["bert"].resolve())]


def test_concurrent_scoring_gives_the_same_scores(rerankers: dict[str, Path]) -> None:
    encoder = load_reranker(rerankers["bert"])
    expected = encoder.score("capital of France", DOCS)
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(encoder.score("capital of France", DOCS))) for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=1e-5, atol=1e-6)
    assert encoder.seconds_per_pair is not None and encoder.seconds_per_pair > 0


def test_from_backbone_keeps_the_pretrained_weights(tmp_path: Path) -> None:
    backbone = make_backbone("bert", tmp_path / "bb")
    model = RerankerModel.from_backbone(backbone)
    original = AutoModel.from_pretrained(backbone)
    for (name, p), (_, q) in zip(model.backbone.named_parameters(), original.named_parameters(), strict=True):
        assert torch.equal(p, q), name
    assert model.config.backbone_name_or_path == str(backbone)
