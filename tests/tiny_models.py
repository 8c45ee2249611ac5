"""Tiny random BERT encoders with the MiniLM tokenizer, saved as model directories (no download)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import BertConfig, BertModel, BertTokenizerFast

from models import EmbedderConfig
from models.loading import packaged_minilm_dir


def minilm_tokenizer() -> BertTokenizerFast:
    return BertTokenizerFast.from_pretrained(packaged_minilm_dir(), local_files_only=True)


def tiny_bert_config(*, layers: int = 1, vocab_size: int | None = None, **overrides: Any) -> BertConfig:
    """32-wide, 2 heads: fast enough to embed thousands of documents in a test."""
    kwargs = {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 128}
    vocab = vocab_size if vocab_size is not None else minilm_tokenizer().vocab_size
    return BertConfig(vocab_size=vocab, num_hidden_layers=layers, **{**kwargs, **overrides})


def save_tiny_bert(root: Path, *, layers: int = 1, embedder: EmbedderConfig | None = None) -> Path:
    """A BertModel directory with tokenizer and embedder config, loadable by `load_embedder` in one call."""
    tok = minilm_tokenizer()
    BertModel(tiny_bert_config(layers=layers, vocab_size=tok.vocab_size)).save_pretrained(root)
    tok.save_pretrained(root)
    (embedder or EmbedderConfig(pooling="mean", max_length=64)).save(root)
    return root


def save_asymmetric(base: Path, root: Path) -> Path:
    """`base` with a query encoder of its own, as `vela adapt` writes one: the base's files (its tokenizer saved
    again), and in `query_encoder/` the same architecture with every weight moved."""
    import dataclasses
    import shutil

    import torch
    from transformers import AutoModel, AutoTokenizer

    shutil.copytree(base, root)
    query = AutoModel.from_pretrained(base)
    with torch.no_grad():
        for p in query.parameters():
            p.add_(0.05 * torch.randn_like(p))
    query.save_pretrained(root / "query_encoder")
    AutoTokenizer.from_pretrained(base).save_pretrained(root)
    dataclasses.replace(EmbedderConfig.from_dir(root), query_encoder="query_encoder").save(root)
    return root


def write_topic_corpus(root: Path) -> Path:
    """A BEIR folder of 24 short documents on 6 topics (titles and two-sentence bodies), for miners and trainers."""
    root.mkdir()
    topics = ["insulin", "graphene", "tides", "appeals", "volcano", "enzymes"]
    docs = [
        {
            "_id": f"d{i}",
            "title": f"On {topics[i % 6]} number {i}",
            "text": f"{topics[i % 6]} study {i}. It found things.",
        }
        for i in range(24)
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    return root
