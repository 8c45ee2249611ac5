from __future__ import annotations

from pathlib import Path

import pytest

from indexing.bm25 import BM25Params
from indexing.chunking import ChunkingParams
from indexing.collection import CollectionSettings
from indexing.store import CollectionStore
from models import EmbedderCache
from models.loading import packaged_minilm_dir


@pytest.fixture(scope="session")
def embedders() -> EmbedderCache:
    return EmbedderCache()


@pytest.fixture
def store(tmp_path: Path) -> CollectionStore:
    return CollectionStore(tmp_path)


@pytest.fixture
def settings() -> CollectionSettings:
    return CollectionSettings(
        name="c1",
        embedder=str(packaged_minilm_dir()),
        dim=384,
        chunking=ChunkingParams(max_tokens=32, overlap=8),
        bm25=BM25Params(),
    )
