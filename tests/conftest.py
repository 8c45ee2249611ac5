"""Shared fixtures: where the benchmark data lives, and offline model settings."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redis_fixtures import RedisServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
BEIR_DIR = Path(os.environ.get("VELA_BEIR_DIR", REPO_ROOT.parent / "shared" / "data" / "beir"))


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that runs `vela serve` or `vela worker` in this process configures the root logger (JSON lines on
    stderr, INFO): put it back, so that later tests see the command-line output they run and nothing more."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def beir_dir() -> Path:
    """The shared BEIR-layout datasets (../shared/data/beir); tests that need them skip without them."""
    if not (BEIR_DIR / "scifact" / "corpus.jsonl").exists():
        pytest.skip(f"benchmark data not found at {BEIR_DIR}")
    return BEIR_DIR


@pytest.fixture(scope="session")
def tiny_embedder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT with the MiniLM tokenizer: fast enough to embed thousands of documents in tests."""
    from tests.tiny_models import save_tiny_bert

    return save_tiny_bert(tmp_path_factory.mktemp("tiny-embedder"))


@pytest.fixture(scope="session")
def tiny_cde_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random two-stage CDE (J = 4) with the MiniLM tokenizer."""
    from models import EmbedderConfig
    from models.cde import CdeConfig, CdeModel
    from tests.tiny_models import minilm_tokenizer, tiny_bert_config

    root = tmp_path_factory.mktemp("tiny-cde")
    tok = minilm_tokenizer()
    backbone = tiny_bert_config(vocab_size=tok.vocab_size)
    CdeModel(CdeConfig.from_backbones(backbone, backbone, corpus_context_size=4)).save_pretrained(root)
    tok.save_pretrained(root)
    EmbedderConfig(pooling="mean", max_length=64).save(root)
    return root


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A two-node Ray cluster on 127.0.0.1 (4 logical CPUs per node) for the session; its address."""
    pytest.importorskip("ray")
    from bench.ray_local import local_cluster

    with local_cluster(cpus=4) as address:
        yield address


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server for this test (tests/redis_fixtures.py), stopped after it."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()
