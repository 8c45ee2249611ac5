"""A reindex that never switches changes nothing: when its gate refuses the new model, it fails or it is cancelled,
the serving generation and the one kept for rollback stay as they were, and a rollback still works. Only a switch
retires the rollback target, so three generations are on disk while a reindex runs (or its generation waits for
promotion) and two otherwise."""

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
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.ranking import RankRequest
from indexing.reindex import clean_all
from indexing.store import CollectionStore
from models import EmbedderCache
from tests.tiny_models import save_tiny_bert

DOCS = [{"id": f"d{i}", "title": f"T{i}", "text": f"tides and the moon number {i} topic{i % 4}"} for i in range(40)]
QUERIES = {f"q{i}": f"moon number {i} topic{i % 4}" for i in range(0, 40, 2)}


@pytest.fixture(scope="module")
def model_b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("model-b"))


@pytest.fixture(scope="module")
def model_c(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another randomly initialised model: on judgements made from B's own top hits it scores lower."""
    return save_tiny_bert(tmp_path_factory.mktemp("model-c"))


@pytest.fixture
def env(tmp_path: Path, tiny_embedder_dir: Path, model_b: Path) -> dict[str, Any]:
    """A collection ingested with model A (generation 0), reindexed to model B (generation 1, promoted): it serves
    B, and keeps A's generation for rollback."""
    store, jobs, embedders = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3"), EmbedderCache()
    dim = embedders.get(str(tiny_embedder_dir)).dim
    chunking = ChunkingParams(max_tokens=32, overlap=8)
    store.create(CollectionSettings(name="c", embedder=str(tiny_embedder_dir), dim=dim, chunking=chunking))
    env: dict[str, Any] = {"store": store, "jobs": jobs, "embedders": embedders, "root": tmp_path / "collections" / "c"}
    assert _run(env, JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    env["a_vectors"] = _dense_vectors(store)
    job = env["jobs"].get(_reindex(env, model_b))
    assert job.status == JobStatus.SUCCEEDED and job.result is not None and job.result["promoted"], job.error
    assert _kept(env) == (1, 0) and gens.on_disk(env["root"]) == [0, 1]
    return env


def _run(env: dict[str, Any], kind: JobKind, payload: list[Any]) -> JobStatus:
    job = env["jobs"].create(collection="c", kind=kind, payload=payload)
    return run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])


def _reindex(env: dict[str, Any], embedder: Path, *, cancel: bool = False, **options: Any) -> str:
    spec = {"collection": "c", "embedder": str(embedder), "embedder_name": embedder.name, **options}
    job = env["jobs"].create(collection="c", kind=JobKind.REINDEX, payload=[spec])
    if cancel:  # DELETE /jobs/{id} while it runs: it stops at its next batch
        env["jobs"].start(job.id)
        env["jobs"].request_cancel(job.id)
    run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])
    return str(job.id)


def _kept(env: dict[str, Any]) -> tuple[int, int | None]:
    pointer = gens.read_pointer(env["root"])
    return pointer.current, pointer.previous


def _dense_vectors(store: CollectionStore) -> np.ndarray:
    return np.concatenate([b.embeddings for b in store.get("c").docstore.batches_after(-1)])


def _serving_top1(env: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Judgements that say each query's own top dense hit in the serving generation is the relevant one."""
    coll = env["store"].get("c")
    emb = env["embedders"].get(coll.settings.embedder)
    texts = list(QUERIES.values())
    fused = engine_search(coll, LOCAL_FANOUT, emb.encode_queries(texts), texts, RankRequest(mode="dense", k=1))
    hits = coll.passages({f.top[0][2]: 0 for f in fused})
    return {q: {hits[f.top[0][2]].doc_id: 1} for q, f in zip(QUERIES, fused, strict=True)}


def _rollback_serves_a(env: dict[str, Any], tiny_embedder_dir: Path) -> None:
    """POST rollback: generation 0 serves again, with model A and A's own vectors, untouched."""
    assert _run(env, JobKind.ROLLBACK, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    coll = env["store"].get("c")
    assert coll.root == env["root"] and coll.settings.embedder == str(tiny_embedder_dir)
    assert np.array_equal(_dense_vectors(env["store"]), env["a_vectors"])
    assert _kept(env) == (0, 1)


def test_a_refused_gate_keeps_the_rollback_target(env: dict[str, Any], model_c: Path, tiny_embedder_dir: Path) -> None:
    gate = {"queries": QUERIES, "qrels": _serving_top1(env), "mode": "dense"}
    job = env["jobs"].get(_reindex(env, model_c, gate=gate))
    assert job.status == JobStatus.FAILED and job.error is not None and "gate refused" in job.error
    assert job.result is not None and job.result["gate"]["old"] == 1.0 and not job.result["gate"]["passed"]
    # Nothing switched, so nothing changed: B serves, A is kept for rollback; the refused generation is gone.
    assert _kept(env) == (1, 0) and gens.read_pointer(env["root"]).building is None
    assert gens.on_disk(env["root"]) == [0, 1]
    _rollback_serves_a(env, tiny_embedder_dir)


@pytest.mark.parametrize("failure", ["an error while it builds", "its gate's dataset removed"])
def test_a_failed_reindex_keeps_the_rollback_target(
    env: dict[str, Any], model_c: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    options: dict[str, Any] = {}
    if failure == "an error while it builds":
        real, calls = gen_sync.prepare_documents, []

        def failing(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) > 1:
                raise OSError(28, "No space left on device")
            return real(*args, **kwargs)

        monkeypatch.setattr(gen_sync, "PAGE", 8)
        monkeypatch.setattr(gen_sync, "prepare_documents", failing)
    else:  # checked when the request came, deleted (`vela datasets remove`) before the gate ran
        options["gate"] = {"dataset": "removed", "mode": "dense"}
    job = env["jobs"].get(_reindex(env, model_c, **options))
    assert job.status == JobStatus.FAILED and job.error is not None and "gate refused" not in job.error
    assert _kept(env) == (1, 0)
    monkeypatch.undo()
    _rollback_serves_a(env, tiny_embedder_dir)
    # The failed job's partial generation is left named for no live job: start-up cleaning removes it, and only it.
    clean_all(env["store"], env["jobs"])
    assert gens.read_pointer(env["root"]).building is None and gens.on_disk(env["root"]) == [0, 1]


def test_a_cancelled_reindex_keeps_the_rollback_target(
    env: dict[str, Any], model_c: Path, tiny_embedder_dir: Path
) -> None:
    job = env["jobs"].get(_reindex(env, model_c, cancel=True))
    assert job.status == JobStatus.CANCELLED
    assert _kept(env) == (1, 0) and gens.read_pointer(env["root"]).building is None
    assert gens.on_disk(env["root"]) == [0, 1]  # the partial generation went, nothing else
    _rollback_serves_a(env, tiny_embedder_dir)


def test_three_on_disk_while_a_generation_waits_and_a_new_reindex_replaces_it(
    env: dict[str, Any], model_c: Path, tiny_embedder_dir: Path
) -> None:
    root = env["root"]
    waiting = env["jobs"].get(_reindex(env, model_c, promote="manual"))
    assert waiting.status == JobStatus.SUCCEEDED and waiting.result is not None and not waiting.result["promoted"]
    pointer = gens.read_pointer(root)
    assert (pointer.current, pointer.previous, pointer.building, pointer.ready) == (1, 0, 2, True)
    assert gens.on_disk(root) == [0, 1, 2]  # serving, rollback target, the one waiting for promotion
    # A reindex started now replaces the waiting generation (as POST /promote would have promoted it), builds its
    # own beside the two kept ones, and its switch retires the old rollback target: two on disk again.
    job = env["jobs"].get(_reindex(env, tiny_embedder_dir))
    assert job.status == JobStatus.SUCCEEDED and job.result is not None and job.result["generation"] == 3
    pointer = gens.read_pointer(root)
    assert (pointer.current, pointer.previous, pointer.building, pointer.ready) == (3, 1, None, False)
    assert gens.on_disk(root) == [1, 3]
    assert sorted(p.name for p in (root / gens.GEN_DIR).iterdir()) == ["1", "3"]  # no trash left either
    assert _run(env, JobKind.ROLLBACK, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    assert gens.generation_of(env["store"].get("c")) == 1 and gens.on_disk(root) == [1, 3]  # a rollback swaps


def test_a_promotion_retires_the_rollback_target_only_after_the_pointer_moves(
    env: dict[str, Any], model_c: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old rollback target is deleted after the new pointer is written: at the moment of its deletion the
    pointer already serves the new generation and keeps the one that served."""
    root = env["root"]
    assert env["jobs"].get(_reindex(env, model_c, promote="manual")).status == JobStatus.SUCCEEDED
    seen: list[tuple[int, int | None, list[int]]] = []
    real = gens.drop

    def watched(at: Path, gen: int) -> None:
        pointer = gens.read_pointer(at)
        seen.append((pointer.current, pointer.previous, [gen]))
        real(at, gen)

    monkeypatch.setattr(gens, "drop", watched)
    assert _run(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    assert seen == [(2, 1, [0])] and gens.on_disk(root) == [1, 2]
