"""A data directory written before segments (whole-collection snapshots under index/) opens, is migrated
into one segment per shard at start-up, and serves the very hits the old code served."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from indexing.store import CollectionStore
from service.search import search_batch

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy-datadir.tar.gz"


class FixedVectors:
    def __init__(self, queries: list[str], vectors: np.ndarray) -> None:
        self.queries, self.vectors = queries, vectors

    def encode_queries(self, queries: list[str], context: object = None) -> np.ndarray:
        return self.vectors[[self.queries.index(q) for q in queries]]


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "data"


def test_legacy_collections_migrate_and_serve_the_same_hits(legacy: Path) -> None:
    expected = json.loads((legacy / "expected.json").read_text())
    encoder = FixedVectors(expected["queries"], np.asarray(expected["vectors"], dtype=np.float32))
    store = CollectionStore(legacy)
    for name, by_mode in expected["results"].items():
        coll = store.get(name)
        assert (coll.root / "index").exists()
        assert coll.check_consistency().startswith("rebuilt")  # as `vela serve` and workers do at start-up
        assert not (coll.root / "index").exists()
        assert coll.check_consistency() == "ok"
        for mode, want in by_mode.items():
            got = search_batch(collection=coll, embedder=encoder, queries=expected["queries"], k=5, mode=mode)
            for g, w in zip(got, want, strict=True):
                assert [(h.id, h.passage_id) for h in g.hits] == [(i, p) for i, p, _ in w], (name, mode)
                assert np.allclose([h.score for h in g.hits], [s for _, _, s in w], rtol=0, atol=1e-5), (name, mode)
