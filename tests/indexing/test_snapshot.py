"""Dense index choice (flat below the threshold, HNSW from it on) and what each kind returns."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from indexing.bm25 import BM25Params
from indexing.collection import CollectionSettings
from indexing.dense import DenseIndexParams
from indexing.docstore import DocStore, StoredDocument
from indexing.snapshot import SnapshotError, build_snapshot, load_snapshot
from models.embedder.modeling_embedder import truncate_embeddings

DIM, SMALL = 32, 16
N = 400


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return unit(np.random.default_rng(0).standard_normal((N, DIM)).astype(np.float32))  # (N, d)


@pytest.fixture
def docstore(tmp_path: Path, vectors: np.ndarray) -> DocStore:
    store = DocStore(tmp_path / "docs.sqlite3")
    words = ["alpha", "beta", "gamma", "delta", "omega"]
    store.upsert(
        StoredDocument(
            doc_id=f"d{i}",
            title="",
            text=f"{words[i % 5]} passage {i}",
            metadata={},
            content_hash=str(i),
            spans=[(0, len(f"{words[i % 5]} passage {i}"))],
            embeddings=vectors[i : i + 1],
        )
        for i in range(N)
    )
    return store


def unit(x: np.ndarray) -> np.ndarray:
    return truncate_embeddings(x, x.shape[-1])  # unit rows, as the serving core normalises


def build(tmp_path: Path, docstore: DocStore, dense: DenseIndexParams) -> int:
    return build_snapshot(
        tmp_path / "index", docstore, dim=DIM, small_dim=SMALL, bm25_params=BM25Params(), extra={}, dense=dense
    )


@pytest.mark.parametrize(("threshold", "kind"), [(N + 1, "flat"), (N, "hnsw"), (0, "hnsw")])
def test_auto_builds_flat_below_the_threshold_and_hnsw_from_it(
    tmp_path: Path, docstore: DocStore, threshold: int, kind: str
) -> None:
    version = build(tmp_path, docstore, DenseIndexParams(hnsw_threshold=threshold))
    snap = load_snapshot(tmp_path / "index", version)
    assert snap.dense_kind == kind and snap.manifest["dense_index"]["kind"] == kind
    full_type = faiss.IndexHNSWFlat if kind == "hnsw" else faiss.IndexFlatIP
    small_type = faiss.IndexHNSWSQ if kind == "hnsw" else faiss.IndexScalarQuantizer
    assert isinstance(snap.dense_full, full_type) and isinstance(snap.dense_small, small_type)
    assert snap.dense_full.ntotal == snap.dense_small.ntotal == N


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_explicit_kind_ignores_the_threshold(tmp_path: Path, docstore: DocStore, kind: str) -> None:
    threshold = 0 if kind == "flat" else 10**9
    version = build(tmp_path, docstore, DenseIndexParams(kind=kind, hnsw_threshold=threshold))
    assert load_snapshot(tmp_path / "index", version).dense_kind == kind


def test_hnsw_returns_the_true_nearest_neighbours(tmp_path: Path, docstore: DocStore, vectors: np.ndarray) -> None:
    version = build(tmp_path, docstore, DenseIndexParams(kind="hnsw", hnsw_m=16, ef_search=64))
    snap = load_snapshot(tmp_path / "index", version)
    assert snap.dense_full.hnsw.efSearch == 64  # applied from the manifest at load
    rng = np.random.default_rng(1)
    queries = unit(vectors[:50] + 0.05 * rng.standard_normal((50, DIM)).astype(np.float32))  # (50, d)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]  # (50, 10) rows; pid = row + 1
    for dim in ("full", "small"):
        # The small path's shortlist is the whole collection here, so its rescored ranking must be exact.
        hits = snap.search_dense(queries, 10, dim=dim, rescore_factor=N // 10)
        for qi, (pids, scores) in enumerate(hits):
            assert list(pids) == list(snap.dense_ids[exact[qi]])
            # Scores are full-dim cosines either way (the small path rescores its shortlist).
            np.testing.assert_allclose(scores, vectors[pids - 1] @ queries[qi], rtol=1e-5)


def test_small_index_rescores_to_full_dim_cosines(tmp_path: Path, docstore: DocStore, vectors: np.ndarray) -> None:
    snap = load_snapshot(tmp_path / "index", build(tmp_path, docstore, DenseIndexParams()))
    q = vectors[7:8]  # (1, d)
    pids, scores = snap.search_dense(q, 5, dim="small")[0]
    np.testing.assert_allclose(scores, vectors[pids - 1] @ q[0], rtol=1e-5)
    assert pids[0] == 8 and scores[0] == pytest.approx(1.0, abs=1e-5)
    prefix_only = snap.search_dense(q, 5, dim="small", rescore_factor=0)[0]
    assert prefix_only[0][0] == 8 and len(prefix_only[0]) == 5


def test_truncated_hnsw_file_is_detected(tmp_path: Path, docstore: DocStore) -> None:
    version = build(tmp_path, docstore, DenseIndexParams(kind="hnsw"))
    target = tmp_path / "index" / f"v{version:06d}" / "dense-full.faiss"
    with open(target, "r+b") as f:
        f.truncate(target.stat().st_size // 2)
    with pytest.raises(SnapshotError):
        load_snapshot(tmp_path / "index", version)


def test_dense_params_are_validated_and_old_settings_load_with_defaults() -> None:
    for bad in ({"kind": "ivf"}, {"hnsw_threshold": -1}, {"hnsw_m": 2}, {"ef_search": 0}):
        with pytest.raises(ValueError):
            DenseIndexParams(**bad)  # type: ignore[arg-type]
    settings = CollectionSettings(name="c", embedder="e", dim=DIM, dense_index=DenseIndexParams(kind="hnsw"))
    assert CollectionSettings.from_json(settings.to_json()) == settings
    old = settings.to_json()
    del old["dense_index"]  # collection.json written before dense index settings existed
    assert CollectionSettings.from_json(old).dense_index == DenseIndexParams()
    assert DenseIndexParams().choose(99_999) == "flat" and DenseIndexParams().choose(100_000) == "hnsw"


def test_the_prefix_index_holds_what_the_matryoshka_loss_trains(
    tmp_path: Path, docstore: DocStore, vectors: np.ndarray
) -> None:
    """The 256-d (here SMALL-d) index stores the torch `truncate_embeddings` of each vector: the same
    prefix, re-normalised, that the Matryoshka loss scores in training (fp16 storage: 1e-3)."""
    import torch

    version = build(tmp_path, docstore, DenseIndexParams(kind="flat"))
    snap = load_snapshot(tmp_path / "index", version)
    full = snap.dense_full.reconstruct_n(0, N)  # (N, DIM): row r of both indexes is the same passage
    stored = snap.dense_small.reconstruct_n(0, N)  # (N, SMALL)
    trained = truncate_embeddings(torch.from_numpy(full), SMALL).numpy()  # (N, SMALL)
    np.testing.assert_allclose(stored, trained, atol=1e-3)
    np.testing.assert_allclose(
        truncate_embeddings(vectors, SMALL), truncate_embeddings(torch.from_numpy(vectors), SMALL).numpy(), atol=1e-6
    )
