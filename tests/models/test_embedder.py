"""Embedder config and pooling, on the packaged MiniLM and on a tiny random BERT saved locally."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models import EmbedderConfig, load_embedder, resolve_model_dir
from tests.tiny_models import save_tiny_bert


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = EmbedderConfig(pooling="cls", query_prefix="query: ", document_prefix="passage: ", max_length=64)
    return save_tiny_bert(tmp_path_factory.mktemp("tiny"), layers=2, embedder=config)


def test_packaged_default_reads_sentence_transformers_files() -> None:
    e = load_embedder("default")
    assert e.config.pooling == "mean" and e.config.max_length == 256 and e.dim == 384
    q = e.encode_queries(["How many people live in Berlin?"])
    d = e.encode_documents(["Berlin has 3.7 million inhabitants.", "Cats are small mammals."])
    assert q.shape == (1, 384) and np.allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-5)
    sims = d @ q[0]
    assert sims[0] > 0.5 > sims[1]


def test_saved_config_drives_prefixes_and_pooling(tiny_dir: Path) -> None:
    e = load_embedder(tiny_dir)
    assert e.config.pooling == "cls" and e.max_tokens == 64 and e.dim == 32
    same_text = "hello world"
    # Different prefixes for queries and documents give different vectors for the same text.
    assert not np.allclose(e.encode_queries([same_text]), e.encode_documents([same_text]))
    # Batched and single encodings agree (padding does not leak into pooling).
    batch = e.encode_documents(["a", "a much longer text " * 10])
    single = e.encode_documents(["a"])
    assert np.allclose(batch[0], single[0], atol=1e-5)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="pooling"):
        EmbedderConfig(pooling="max")
    with pytest.raises(ValueError, match="unknown embedder config keys"):
        EmbedderConfig.from_dict({"pooling": "mean", "bogus": 1})


def test_unknown_model_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="local Hugging Face model directory"):
        resolve_model_dir(tmp_path / "nope")
