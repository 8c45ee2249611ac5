"""Generations through the job runner: reindex, catch-up of writes, promotion, rollback, cancel, clean-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import indexing.gen_sync as gen_sync
from indexing import generations as gens
from indexing.chunking import ChunkingParams
from indexing.collection import CollectionSettings
from indexing.engine import LOCAL_FANOUT
from indexing.engine import search as engine_search
from indexing.gen_sync import stored_hashes
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.ranking import RankRequest
from indexing.reindex import clean_all
from indexing.store import CollectionStore
from models import EmbedderCache
from tests.tiny_models import save_asymmetric, save_tiny_bert

DOCS = [{"id": f"d{i}", "title": f"T{i}", "text": f"tides and the moon number {i} topic{i % 4}"} for i in range(40)]


@pytest.fixture(scope="module")
def second_embedder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-two"))


@pytest.fixture
def env(tmp_path: Path, tiny_embedder_dir: Path) -> dict[str, Any]:
    store = CollectionStore(tmp_path)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    embedders = EmbedderCache()
    dim = embedders.get(str(tiny_embedder_dir)).dim
    settings = CollectionSettings(
        name="c", embedder=str(tiny_embedder_dir), dim=dim, chunking=ChunkingParams(max_tokens=32, overlap=8)
    )
    store.create(settings)
    env = {"store": store, "jobs": jobs, "embedders": embedders, "root": tmp_path / "collections" / "c"}
    assert _job(env, JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    return env


def _job(env: dict[str, Any], kind: JobKind, payload: list[Any]) -> JobStatus:
    job = env["jobs"].create(collection="c", kind=kind, payload=payload)
    return run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])


def _reindex(env: dict[str, Any], embedder: Path, **options: Any) -> str:
    spec = {"collection": "c", "embedder": str(embedder), "embedder_name": "two", **options}
    job = env["jobs"].create(collection="c", kind=JobKind.REINDEX, payload=[spec])
    run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])
    return str(job.id)


def _encoded_ids(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the documents a sync sends to the encoder from now on."""
    ids: list[str] = []
    real = gen_sync.prepare_documents
    monkeypatch.setattr(
        gen_sync, "prepare_documents", lambda docs, *a, **kw: ids.extend(d["id"] for d in docs) or real(docs, *a, **kw)
    )
    return ids


def _dense_vectors(env: dict[str, Any]) -> np.ndarray:
    coll = env["store"].get("c")
    return np.concatenate([b.embeddings for b in coll.docstore.batches_after(-1)])


def test_reindex_promotes_a_new_generation_and_rollback_restores_the_old(
    env: dict[str, Any], second_embedder: Path, tiny_embedder_dir: Path
) -> None:
    store, root = env["store"], env["root"]
    before = _dense_vectors(env)
    job_id = _reindex(env, second_embedder)
    job = env["jobs"].get(job_id)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result is not None and job.result["promoted"] and job.result["generation"] == 1
    assert job.done == job.total == len(DOCS)
    assert job.result["documents"] == {"embedded": len(DOCS), "copied": 0}
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
    assert _job(env, JobKind.ROLLBACK, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    assert store.get("c").root == root and store.get("c").settings.embedder == str(tiny_embedder_dir)
    assert np.array_equal(_dense_vectors(env), before)
    # And forward again; a second reindex's switch drops the generation it replaces as rollback target.
    assert _job(env, JobKind.ROLLBACK, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    assert gens.generation_of(store.get("c")) == 1
    _reindex(env, tiny_embedder_dir)
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
    encoded = _encoded_ids(monkeypatch)
    job_id = _reindex(env, adapted_embedder, promote="manual")
    job = env["jobs"].get(job_id)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": 0, "copied": len(DOCS)} and encoded == []
    assert job.done == job.total == len(DOCS)
    # A write to the serving generation meanwhile is copied too, at promotion: the old model encoded it as the
    # new one would.
    new_doc = [{"id": "n1", "text": "a brand new document about volcanoes"}]
    assert _job(env, JobKind.UPSERT, new_doc) == JobStatus.SUCCEEDED
    assert _job(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
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
    encoded = _encoded_ids(monkeypatch)
    job = env["jobs"].get(_reindex(env, adapted_embedder, promote="manual", reencode=True))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": len(DOCS), "copied": 0} and len(encoded) == len(DOCS)
    assert _job(env, JobKind.UPSERT, [{"id": "n1", "text": "written while it waits"}]) == JobStatus.SUCCEEDED
    assert _job(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    assert encoded[-1] == "n1"  # the promotion's catch-up encoded it too


def test_a_sharded_collection_copies_its_vectors_shard_by_shard(
    tmp_path: Path, tiny_embedder_dir: Path, adapted_embedder: Path
) -> None:
    store, jobs, embedders = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3"), EmbedderCache()
    dim = embedders.get(str(tiny_embedder_dir)).dim
    store.create(CollectionSettings(name="c", embedder=str(tiny_embedder_dir), dim=dim, shards=2))
    env = {"store": store, "jobs": jobs, "embedders": embedders}
    assert _job(env, JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    job = jobs.get(_reindex(env, adapted_embedder))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": 0, "copied": len(DOCS)}
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
        _job({"store": store, "jobs": jobs, "embedders": EmbedderCache()}, JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    )
    shutil.rmtree(gone)
    job = jobs.get(_reindex({"store": store, "jobs": jobs, "embedders": EmbedderCache()}, adapted_embedder))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": len(DOCS), "copied": 0}


def test_a_new_chunking_or_another_model_encodes_every_document(
    env: dict[str, Any], adapted_embedder: Path, second_embedder: Path
) -> None:
    job = env["jobs"].get(_reindex(env, adapted_embedder, chunking={"max_tokens": 16, "overlap": 4}))
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["documents"] == {"embedded": len(DOCS), "copied": 0}
    coll = env["store"].get("c")
    assert coll.settings.chunking == ChunkingParams(max_tokens=16, overlap=4)


def test_writes_after_the_build_reach_the_new_generation_at_promotion(
    env: dict[str, Any], second_embedder: Path
) -> None:
    store, root = env["store"], env["root"]
    job_id = _reindex(env, second_embedder, promote="manual")
    assert env["jobs"].get(job_id).result == {**env["jobs"].get(job_id).result, "promoted": False}
    assert gens.generation_of(store.get("c")) == 0  # still serving the old one
    new = [{"id": "n1", "text": "a brand new document about volcanoes"}]
    assert _job(env, JobKind.UPSERT, new) == JobStatus.SUCCEEDED
    assert _job(env, JobKind.DELETE, ["d0", "d1"]) == JobStatus.SUCCEEDED
    assert _job(env, JobKind.UPSERT, [{"id": "d2", "text": "rewritten"}]) == JobStatus.SUCCEEDED
    building = gens.open_generation(root, 1)
    assert "n1" not in stored_hashes(building)
    assert _job(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    coll = store.get("c")
    assert gens.generation_of(coll) == 1
    hashes = stored_hashes(coll)
    assert "n1" in hashes and "d0" not in hashes and "d1" not in hashes and len(hashes) == len(DOCS) - 1
    assert coll.document("d2").text == "rewritten"  # type: ignore[union-attr]
    assert coll.view().seq == coll.docstore.seq()  # published: searches see it


def test_a_metadata_change_during_a_reindex_is_not_embedded_again(
    env: dict[str, Any], second_embedder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, root = env["store"], env["root"]
    _reindex(env, second_embedder, promote="manual")
    patch = [{"id": "d3", "metadata": {"year": 2024}, "mode": "merge"}]
    assert _job(env, JobKind.PATCH, patch) == JobStatus.SUCCEEDED
    before = gens.open_generation(root, 1).document("d3")
    embedded = _encoded_ids(monkeypatch)
    assert _job(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    coll = store.get("c")
    after = coll.document("d3")
    assert gens.generation_of(coll) == 1 and embedded == []  # caught up without the encoder
    assert after is not None and before is not None and after.metadata == {"year": 2024}
    assert stored_hashes(coll)["d3"] == stored_hashes(gens.open_generation(root, 0))["d3"]


def test_a_writer_that_waited_through_a_switch_writes_the_new_generation(
    env: dict[str, Any], second_embedder: Path
) -> None:
    store = env["store"]
    old = store.get("c")
    _reindex(env, second_embedder)
    store._open["c"] = old  # as a worker process that has not followed yet sees it
    assert _job(env, JobKind.UPSERT, [{"id": "late", "text": "written after the switch"}]) == JobStatus.SUCCEEDED
    coll = store.get("c")
    assert gens.generation_of(coll) == 1 and coll.document("late") is not None


def test_cancel_removes_the_partial_generation(env: dict[str, Any], second_embedder: Path) -> None:
    jobs, root = env["jobs"], env["root"]
    spec = {"collection": "c", "embedder": str(second_embedder)}
    job = jobs.create(collection="c", kind=JobKind.REINDEX, payload=[spec])
    jobs.start(job.id)
    jobs.request_cancel(job.id)
    status = run_job(job_id=job.id, jobs=jobs, collections=env["store"], embedders=env["embedders"])
    assert status == JobStatus.CANCELLED
    assert gens.on_disk(root) == [0] and gens.read_pointer(root).building is None


def _top1(coll: Any, emb: Any, queries: dict[str, str]) -> dict[str, dict[str, int]]:
    """Judgements that say each query's own top dense hit is the relevant one: that generation scores 1.0."""
    texts = list(queries.values())
    fused = engine_search(coll, LOCAL_FANOUT, emb.encode_queries(texts), texts, RankRequest(mode="dense", k=1))
    hits = coll.passages({f.top[0][2]: 0 for f in fused})
    return {q: {hits[f.top[0][2]].doc_id: 1} for q, f in zip(queries, fused, strict=True)}


def test_gate_passes_an_equal_generation_and_refuses_a_worse_one(env: dict[str, Any], second_embedder: Path) -> None:
    coll = env["store"].get("c")
    queries = {f"q{i}": f"moon number {i} topic{i % 4}" for i in range(0, 40, 2)}
    qrels = _top1(coll, env["embedders"].get(coll.settings.embedder), queries)
    # BM25 reads the same texts in both generations: equal figures, the gate passes.
    ok = _reindex(env, second_embedder, gate={"queries": queries, "qrels": qrels, "mode": "bm25"}, promote="manual")
    res = env["jobs"].get(ok).result
    assert res is not None and res["gate"]["passed"] and res["gate"]["old"] == res["gate"]["new"]
    # Dense, judged by what the serving model finds: another random model scores far lower and is refused.
    bad = _reindex(env, second_embedder, gate={"queries": queries, "qrels": qrels, "mode": "dense"})
    job = env["jobs"].get(bad)
    assert job.status == JobStatus.FAILED and job.error is not None and "gate refused" in job.error
    gate = job.result["gate"]  # type: ignore[index]
    assert gate["old"] == 1.0 and gate["new"] < gate["old"] and not gate["passed"]
    assert gens.generation_of(env["store"].get("c")) == 0 and gens.on_disk(env["root"]) == [0]


def test_clean_removes_orphans_and_keeps_a_running_reindex(env: dict[str, Any], second_embedder: Path) -> None:
    root, jobs = env["root"], env["jobs"]
    (root / "generations").mkdir(exist_ok=True)
    (root / "generations" / "7").mkdir()  # no pointer names it (a crash between its build and the pointer)
    (root / "generations" / ".new-x").mkdir()
    clean_all(env["store"], jobs)
    assert gens.on_disk(root) == [0] and not (root / "generations" / ".new-x").exists()


def test_a_chosen_fusion_is_chosen_again_for_the_new_embedder(env: dict[str, Any], second_embedder: Path) -> None:
    store = env["store"]
    coll = store.get("c")
    with coll.writer():  # as the background choice leaves it, for the old embedder
        coll.set_fusion({"method": "rrf", "chosen": {"documents": len(DOCS), "at": 1.0}})
    _reindex(env, second_embedder)
    fusion = store.get("c").settings.fusion
    assert gens.generation_of(store.get("c")) == 1 and fusion["chosen"]["at"] != 1.0
    # One an operator set (no "chosen" record) is kept as it is.
    with store.get("c").writer():
        store.get("c").set_fusion({"method": "rrf"})
    _reindex(env, second_embedder)
    assert store.get("c").settings.fusion == {"method": "rrf"}
