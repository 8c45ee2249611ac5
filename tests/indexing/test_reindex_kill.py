"""SIGKILL the process that runs a reindex partway: the serving generation keeps answering, the job resumes after
a restart and completes, and afterwards no orphaned file is left and at most two generations are on disk (three
while the reindex runs: serving, rollback target, building). A kill between a promotion's new pointer and the
deletion of the rollback target it replaced leaves that target's directory, unnamed, for start-up cleaning or the
resumed job to remove."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from indexing import generations as gens
from indexing.chunking import ChunkingParams
from indexing.collection import CollectionSettings
from indexing.context import current_context, queue_context_refresh
from indexing.engine import LOCAL_FANOUT
from indexing.engine import search as engine_search
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.ranking import RankRequest
from indexing.reindex import clean_all
from indexing.store import CollectionStore
from models import EmbedderCache
from tests.tiny_models import save_tiny_bert

REPO = Path(__file__).resolve().parents[2]
DOCS = [{"id": f"d{i}", "text": f"tides and the moon, note {i} on topic{i % 5}"} for i in range(120)]


def _runner(data: Path, job_id: str, *flags: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "tests.indexing.reindex_runner", str(data), job_id, *flags]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, env=env)


def _hits(store: CollectionStore) -> list[str]:
    coll = store.get("c")
    (fused,) = engine_search(coll, LOCAL_FANOUT, None, ["moon topic3"], RankRequest(mode="bm25", k=5))
    return [coll.passages({pid: 0 for _, _, pid in fused.top})[pid].doc_id for _, _, pid in fused.top]


def _ingested(data: Path, model: Path) -> tuple[CollectionStore, JobStore, EmbedderCache]:
    """The collection "c" under `data`, DOCS ingested with `model` (generation 0)."""
    store, jobs, embedders = CollectionStore(data), JobStore(data / "jobs.sqlite3"), EmbedderCache()
    dim = embedders.get(str(model)).dim
    store.create(CollectionSettings(name="c", embedder=str(model), dim=dim, chunking=ChunkingParams(32, 8)))
    job = jobs.create(collection="c", kind=JobKind.UPSERT, payload=DOCS)
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders) == JobStatus.SUCCEEDED
    return store, jobs, embedders


@pytest.mark.parametrize("refresh", ["new embedder", pytest.param("CDE context refresh", marks=pytest.mark.slow)])
def test_sigkill_partway_then_resume(tmp_path: Path, request: pytest.FixtureRequest, refresh: str) -> None:
    cde = refresh == "CDE context refresh"
    model = request.getfixturevalue("tiny_cde_dir" if cde else "tiny_embedder_dir")
    data = tmp_path / "data"
    store, jobs, embedders = _ingested(data, model)
    serving = _hits(store)
    root = data / "collections" / "c"
    old_context = current_context(store.get("c"))
    if cde:  # the same embedder, a new corpus context: what a drifted CDE collection queues by itself
        new_model = model
        job = jobs.get(queue_context_refresh(jobs, store.get("c")) or "")
    else:
        new_model = save_tiny_bert(tmp_path / "two")
        spec = {"collection": "c", "embedder": str(new_model), "embedder_name": "two"}
        job = jobs.create(collection="c", kind=JobKind.REINDEX, payload=[spec])

    proc = _runner(data, job.id, "--slow")
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    deadline = time.time() + 60
    while jobs.get(job.id).done < 40:  # a third of the way
        assert time.time() < deadline and proc.poll() is None
        assert _hits(store) == serving  # the serving generation answers all along
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert jobs.get(job.id).status == JobStatus.RUNNING and jobs.get(job.id).done < len(DOCS)
    assert gens.read_pointer(root).building == 1 and gens.on_disk(root) == [0, 1]  # the partial generation

    # A restart: a fresh store serves the current generation; start-up cleaning keeps the unfinished reindex's.
    store = CollectionStore(data)
    assert _hits(store) == serving and gens.generation_of(store.get("c")) == 0
    clean_all(store, jobs)
    assert gens.on_disk(root) == [0, 1]
    proc = _runner(data, job.id)  # the queue runs the unfinished job again
    assert proc.wait(120) == 0
    assert proc.stdout is not None and proc.stdout.read().split()[-1] == "succeeded"
    done = jobs.get(job.id)
    assert done.status == JobStatus.SUCCEEDED and done.attempts == 2 and done.result is not None
    assert done.result["promoted"] and done.done == done.total == len(DOCS)
    counts = done.result["documents"]  # the first run's documents count as resumed: the counts add up
    assert counts["resumed"] >= 32 and counts["embedded"] + counts["copied"] + counts["resumed"] == len(DOCS), counts

    store = CollectionStore(data)
    coll = store.get("c")
    assert gens.generation_of(coll) == 1 and coll.settings.embedder == str(new_model)
    assert sorted(coll.docstore.document_ids()) == sorted(d["id"] for d in DOCS)  # each document exactly once
    assert coll.docstore.counts()[1] == coll.view().n_live
    if cde:  # every vector of the new generation made with its new context, which queries use too
        ctx = current_context(coll)
        assert ctx is not None and old_context is not None and ctx.id != old_context.id
        assert coll.view().context is not None and coll.view().context.id == ctx.id
        assert coll.docstore.count_stale(ctx.id) == 0 and done.result["reason"] == "context refresh"
        texts = [t for _, ts, _ in coll.docstore.iter_passages() for t in ts]
        stored = np.concatenate([emb for _, _, emb in coll.docstore.iter_passages()])
        fresh = embedders.get(str(model)).encode_documents(texts, context=ctx)
        np.testing.assert_allclose(stored, fresh, atol=1e-5)
    clean_all(store, jobs)
    assert gens.on_disk(root) == [0, 1]  # the new one and the one kept for rollback: two at most
    assert sorted(p.name for p in (root / "generations").iterdir()) == ["1"]  # no half-built or trashed leftovers


def _reindexed_once(tmp_path: Path, model: Path) -> tuple[Path, CollectionStore, JobStore, Path]:
    """A collection ingested with `model` (generation 0) and reindexed in-process to another model (generation 1):
    it serves generation 1 and keeps 0 for rollback. Returns the data directory, store, jobs, and a third model."""
    data = tmp_path / "data"
    store, jobs, embedders = _ingested(data, model)
    spec = {"collection": "c", "embedder": str(save_tiny_bert(tmp_path / "two")), "embedder_name": "two"}
    job = jobs.create(collection="c", kind=JobKind.REINDEX, payload=[spec])
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders) == JobStatus.SUCCEEDED
    root = data / "collections" / "c"
    pointer = gens.read_pointer(root)
    assert (pointer.current, pointer.previous) == (1, 0) and gens.on_disk(root) == [0, 1]
    return data, store, jobs, save_tiny_bert(tmp_path / "three")


def _reindex_job(jobs: JobStore, model: Path) -> str:
    spec = {"collection": "c", "embedder": str(model), "embedder_name": "three"}
    return str(jobs.create(collection="c", kind=JobKind.REINDEX, payload=[spec]).id)


def _rolls_back_to(data: Path, jobs: JobStore, gen: int) -> None:
    store = CollectionStore(data)
    job = jobs.create(collection="c", kind=JobKind.ROLLBACK, payload=[{"collection": "c"}])
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache()) == JobStatus.SUCCEEDED
    assert gens.generation_of(store.get("c")) == gen


@pytest.mark.slow  # `make test-slow`: the default suite keeps under 15 minutes
def test_sigkill_partway_through_a_second_reindex_keeps_the_rollback_target(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    data, store, jobs, three = _reindexed_once(tmp_path, tiny_embedder_dir)
    root = data / "collections" / "c"
    serving = _hits(store)
    job_id = _reindex_job(jobs, three)
    proc = _runner(data, job_id, "--slow")
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    deadline = time.time() + 60
    while jobs.get(job_id).done < 40:
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    pointer = gens.read_pointer(root)
    assert (pointer.current, pointer.previous, pointer.building) == (1, 0, 2)
    assert gens.on_disk(root) == [0, 1, 2]  # serving, rollback target, building: three during a reindex

    store = CollectionStore(data)  # a restart: cleaning keeps all three (the reindex is unfinished)
    assert _hits(store) == serving
    clean_all(store, jobs)
    assert gens.on_disk(root) == [0, 1, 2]
    proc = _runner(data, job_id)
    assert proc.wait(120) == 0
    assert proc.stdout is not None and proc.stdout.read().split()[-1] == "succeeded"
    assert jobs.get(job_id).attempts == 2
    pointer = gens.read_pointer(root)
    assert (pointer.current, pointer.previous, pointer.building) == (2, 1, None)
    assert gens.on_disk(root) == [1, 2]  # the switch retired generation 0: two again
    assert sorted(p.name for p in (root / "generations").iterdir()) == ["1", "2"]
    _rolls_back_to(data, jobs, 1)


@pytest.mark.parametrize("cleaned_by", [pytest.param("start-up cleaning", marks=pytest.mark.slow), "the resumed job"])
def test_a_kill_between_the_switch_and_the_deletion_leaves_only_an_unnamed_directory(
    tmp_path: Path, tiny_embedder_dir: Path, cleaned_by: str
) -> None:
    data, _, jobs, three = _reindexed_once(tmp_path, tiny_embedder_dir)
    root = data / "collections" / "c"
    job_id = _reindex_job(jobs, three)
    proc = _runner(data, job_id, "--die-before-retire")
    assert proc.wait(120) == 137  # killed right after the new pointer was written
    pointer = gens.read_pointer(root)
    assert (pointer.current, pointer.previous, pointer.switched_by) == (2, 1, job_id)
    assert gens.on_disk(root) == [0, 1, 2]  # generation 0 is named no more, but still on disk
    assert jobs.get(job_id).status == JobStatus.RUNNING
    store = CollectionStore(data)
    assert gens.generation_of(store.get("c")) == 2  # the switch is committed: the new generation serves

    if cleaned_by == "start-up cleaning":
        clean_all(store, jobs)
        assert gens.on_disk(root) == [1, 2]
    proc = _runner(data, job_id)  # the job runs again, sees its switch done, and only reports success
    assert proc.wait(120) == 0
    assert proc.stdout is not None and proc.stdout.read().split()[-1] == "succeeded"
    done = jobs.get(job_id)
    assert done.status == JobStatus.SUCCEEDED and done.attempts == 2
    # The result the killed run recorded before its switch: the documents it encoded, and the switch made.
    assert done.result is not None and (done.result["generation"], done.result["previous"]) == (2, 1)
    assert done.result["promoted"] is True and done.result["documents"] == {
        "embedded": len(DOCS),
        "copied": 0,
        "resumed": 0,
    }
    assert gens.on_disk(root) == [1, 2]
    assert sorted(p.name for p in (root / "generations").iterdir()) == ["1", "2"]
    assert not any(e.name not in gens.KEEP for e in root.iterdir())  # nothing of generation 0 left
    _rolls_back_to(data, jobs, 1)
