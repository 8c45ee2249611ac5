"""Shared fixtures: where the benchmark data lives, and offline model settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
BEIR_DIR = Path(os.environ.get("VELA_BEIR_DIR", REPO_ROOT.parent / "shared" / "data" / "beir"))


@pytest.fixture(scope="session")
def beir_dir() -> Path:
    """The shared BEIR-layout datasets (../shared/data/beir); tests that need them skip without them."""
    if not (BEIR_DIR / "scifact" / "corpus.jsonl").exists():
        pytest.skip(f"benchmark data not found at {BEIR_DIR}")
    return BEIR_DIR


@pytest.fixture(scope="session")
def tiny_embedder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT with the MiniLM tokenizer: fast enough to embed thousands of documents in tests."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from models import EmbedderConfig
    from models.loading import packaged_minilm_dir

    root = tmp_path_factory.mktemp("tiny-embedder")
    tok = BertTokenizerFast.from_pretrained(packaged_minilm_dir(), local_files_only=True)
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(cfg).save_pretrained(root)
    tok.save_pretrained(root)
    EmbedderConfig(pooling="mean", max_length=64).save(root)
    return root


@pytest.fixture(scope="session")
def tiny_cde_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random two-stage CDE (J = 4) with the MiniLM tokenizer."""
    from transformers import BertConfig, BertTokenizerFast

    from models import EmbedderConfig
    from models.cde import CdeConfig, CdeModel
    from models.loading import packaged_minilm_dir

    root = tmp_path_factory.mktemp("tiny-cde")
    tok = BertTokenizerFast.from_pretrained(packaged_minilm_dir(), local_files_only=True)
    backbone = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    CdeModel(CdeConfig.from_backbones(backbone, backbone, corpus_context_size=4)).save_pretrained(root)
    tok.save_pretrained(root)
    EmbedderConfig(pooling="mean", max_length=64).save(root)
    return root
