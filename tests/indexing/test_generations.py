"""Generations through the job runner: a reindex promotes a new generation and rollback restores the old, and a
reindex copies the document vectors its new embedder would make again (a new query side) instead of encoding them,
encoding where it must. Promotion's catch-up, the gate, cancel and clean-up: test_generation_promotion.py."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexing import generations as gens
from indexing.chunking import ChunkingParams
from indexing.collection import CollectionSettings
from indexing.engine import LOCAL_FANOUT
from indexing.engine import search as engine_search
from indexing.gen_sync import stored_hashes
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.ranking import RankRequest
from indexing.store import CollectionStore
from models import EmbedderCache
from tests.indexing.generation_helpers import DOCS, encoded_ids, make_env, run_one_job, run_reindex
from tests.tiny_models import save_asymmetric, save_tiny_bert


@pytest.fixture(scope="module")
def second_embedder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-two"))


@pytest.fixture
def env(tmp_path: Path, tiny_embedder_dir: Path) -> dict[str, Any]:
    return make_env(tmp_path, tiny_embedder_dir)


def _dense_vectors(env: dict[str, Any]) -> np.ndarray:
    coll = env["store"].get("c")
    return np.concatenate([b.embeddings for b in coll.docstore.batches_after(-1)])


def test_reindex_promotes_a_new_generation_and_rollback_restores_the_old(
    env: dict[str, Any], second_embedder: Path, tiny_embedder_dir: Path
) -> None:
    store, root = env["store"], env["root"]
    before = _dense_vectors(env)
    job_id = run_reindex(env, second_embedder)
    job = env["jobs"].get(job_id)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result is not None and job.result["promoted"] and job.result["generation"] == 1
    assert job.done == job.total == len(DOCS)
    assert job.result["documents"] == {"embedded": len(DOCS), "copied": 0, "resumed": 0}
    coll = store.get("c")
    assert coll.root == root / "generations" / "1" and coll.settings.embedder == str(second_embedder)
    # The vectors are the new embedder's: what it makes of the stored passages, not the old ones.
    after = _dense_vectors(env)
    new_model = env["embedders"].get(str(second_embedder))
    first = coll.docstore.batches_after(-1, 4).__next__()
    assert np.allclose(after[:4], new_model.encode_documents(first.texts), atol=1e-5)
    assert not np.allclose(after[: len(before)], before[: len(after)])
    assert gens.on_disk(root) == [0, 1]
    # Rollback: the previous generation again, with its own vectors, untouched.
    assert run_one_job(env, JobKind.ROLLBACK, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    assert store.get("c").root == root and store.get("c").settings.embedder == str(tiny_embedder_dir)
    assert np.array_equal(_dense_vectors(env), before)
    # And forward again; a second reindex's switch drops the generation it replaces as rollback target.
    assert run_one_job(env, JobKind.ROLLBACK, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    assert gens.generation_of(store.get("c")) == 1
    run_reindex(env, tiny_embedder_dir)
    assert gens.generation_of(store.get("c")) == 2 and gens.on_disk(root) == [1, 2]
    assert gens.read_pointer(root).previous == 1


@pytest.fixture(scope="module")
def adapted_embedder(tiny_embedder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The env's model with a new query side: its documents encode exactly as before."""
    return save_asymmetric(tiny_embedder_dir, tmp_path_factory.mktemp("adapted") / "model")


def test_a_new_query_side_copies_the_document_vectors_instead_of_encoding(
    env: dict[str, Any], adapted_embedder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, root = env["store"], env["root"]
    encoded = encoded_ids(monkeypatch)
    job_id = run_reindex(env, adapted_embedder, promote="manual")
    job = env["jobs"].get(job_id)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": 0, "copied": len(DOCS), "resumed": 0} and encoded == []
    assert job.done == job.total == len(DOCS)
    # A write to the serving generation meanwhile is copied too, at promotion: the old model encoded it as the
    # new one would.
    new_doc = [{"id": "n1", "text": "a brand new document about volcanoes"}]
    assert run_one_job(env, JobKind.UPSERT, new_doc) == JobStatus.SUCCEEDED
    assert run_one_job(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    coll = store.get("c")
    assert gens.generation_of(coll) == 1 and encoded == []
    ids = [d["id"] for d in DOCS]
    old, new = gens.open_generation(root, 0).docstore.stored_documents(ids), coll.docstore.stored_documents(ids)
    assert all(np.array_equal(new[i].embeddings, old[i].embeddings) and new[i].spans == old[i].spans for i in ids)
    new_model = env["embedders"].get(str(adapted_embedder))
    n1 = coll.docstore.stored_documents(["n1"])["n1"]
    # (The new model serves as ONNX here, the old one as torch: the same weights, a few 1e-5 apart.)
    assert np.allclose(n1.embeddings, new_model.encode_documents(["a brand new document about volcanoes"]), atol=1e-3)
    # Searches use the new query side over the copied vectors.
    q = new_model.encode_queries(["tides and the moon number 7 topic3"])
    assert not np.allclose(q, env["embedders"].get(str(coll.settings.embedder)).encode_queries(["x"]))
    found = engine_search(coll, LOCAL_FANOUT, q, ["tides and the moon number 7 topic3"], RankRequest(mode="dense", k=3))
    assert len(found[0].top) == 3
    assert stored_hashes(coll) == stored_hashes(gens.open_generation(root, 0))


def test_reencode_encodes_every_document_through_the_promotion_too(
    env: dict[str, Any], adapted_embedder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded = encoded_ids(monkeypatch)
    job = env["jobs"].get(run_reindex(env, adapted_embedder, promote="manual", reencode=True))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": len(DOCS), "copied": 0, "resumed": 0} and len(encoded) == len(DOCS)
    assert run_one_job(env, JobKind.UPSERT, [{"id": "n1", "text": "written while it waits"}]) == JobStatus.SUCCEEDED
    assert run_one_job(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    assert encoded[-1] == "n1"  # the promotion's catch-up encoded it too


def test_a_sharded_collection_copies_its_vectors_shard_by_shard(
    tmp_path: Path, tiny_embedder_dir: Path, adapted_embedder: Path
) -> None:
    store, jobs, embedders = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3"), EmbedderCache()
    dim = embedders.get(str(tiny_embedder_dir)).dim
    store.create(CollectionSettings(name="c", embedder=str(tiny_embedder_dir), dim=dim, shards=2))
    env = {"store": store, "jobs": jobs, "embedders": embedders}
    assert run_one_job(env, JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    job = jobs.get(run_reindex(env, adapted_embedder))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": 0, "copied": len(DOCS), "resumed": 0}
    old, new = gens.open_generation(tmp_path / "collections" / "c", 0), store.get("c")
    assert [len(s.docstore.document_ids()) for s in new.shard_list] == [
        len(s.docstore.document_ids()) for s in old.shard_list
    ]
    ids = [d["id"] for d in DOCS]
    a, b = old.stored_documents(ids), new.stored_documents(ids)
    assert all(np.array_equal(a[i].embeddings, b[i].embeddings) for i in ids)


def test_a_current_model_that_cannot_be_loaded_means_encoding_not_failing(
    tmp_path: Path, tiny_embedder_dir: Path, adapted_embedder: Path
) -> None:
    import shutil

    gone = shutil.copytree(tiny_embedder_dir, tmp_path / "removed-model")
    store, jobs = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3")
    dim = EmbedderCache().get(str(gone)).dim
    store.create(CollectionSettings(name="c", embedder=str(gone), dim=dim))
    assert (
        run_one_job({"store": store, "jobs": jobs, "embedders": EmbedderCache()}, JobKind.UPSERT, DOCS)
        == JobStatus.SUCCEEDED
    )
    shutil.rmtree(gone)
    job = jobs.get(run_reindex({"store": store, "jobs": jobs, "embedders": EmbedderCache()}, adapted_embedder))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": len(DOCS), "copied": 0, "resumed": 0}


def test_a_new_chunking_or_another_model_encodes_every_document(
    env: dict[str, Any], adapted_embedder: Path, second_embedder: Path
) -> None:
    job = env["jobs"].get(run_reindex(env, adapted_embedder, chunking={"max_tokens": 16, "overlap": 4}))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": len(DOCS), "copied": 0, "resumed": 0}
    coll = env["store"].get("c")
    assert coll.settings.chunking == ChunkingParams(max_tokens=16, overlap=4)


def test_a_pointer_from_a_newer_release_is_refused_by_name(tmp_path: Path) -> None:
    """A `generations.json` holding a field this release does not know (a newer one wrote it) is refused with a
    message that says so, not a TypeError from the dataclass."""
    (tmp_path / gens.POINTER).write_text(json.dumps({**asdict(gens.Pointer()), "from_the_future": 1}))
    with pytest.raises(ValueError, match=r"does not know, \['from_the_future'\]: a newer release wrote it"):
        gens.read_pointer(tmp_path)
