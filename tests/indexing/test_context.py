"""CDE collections: the corpus context is sampled once, cached, used for documents and queries, refreshed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import indexing.gen_sync as gen_sync
from indexing import generations as gens
from indexing.chunking import ChunkingParams
from indexing.collection import Collection, CollectionSettings
from indexing.context import current_context, drift
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.store import CollectionStore
from models import EmbedderCache
from models.cde.embedder import CdeEmbedder
from service.search import search_batch

DOCS = [{"id": f"d{i}", "title": f"T{i}", "text": f"document {i} about topic{i % 3} and more words"} for i in range(8)]
MORE = [{"id": f"e{i}", "title": f"U{i}", "text": f"another text {i} on subject{i % 2}"} for i in range(8)]


@pytest.fixture
def cde_coll(tmp_path: Path, tiny_cde_dir: Path) -> tuple[CollectionStore, Collection, JobStore, EmbedderCache]:
    store = CollectionStore(tmp_path / "data")
    coll = store.create(
        CollectionSettings(
            name="c1", embedder=str(tiny_cde_dir), dim=32, chunking=ChunkingParams(max_tokens=16, overlap=4)
        )
    )
    return store, coll, JobStore(tmp_path / "jobs.sqlite3"), EmbedderCache()


def _ingest(store: CollectionStore, jobs: JobStore, embedders: EmbedderCache, docs: list[Any], **kw: Any) -> JobStatus:
    job = jobs.create(collection="c1", kind=JobKind.UPSERT, payload=docs)
    return run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders, batch_size=3, **kw)


def _reindex_jobs(jobs: JobStore) -> list[Any]:
    rows = jobs._conn().execute("SELECT id FROM jobs WHERE kind = ?", (JobKind.REINDEX.value,)).fetchall()
    return [jobs.get(r[0]) for r in rows]


def _stored_vectors(coll: Collection) -> np.ndarray:
    return np.concatenate([emb for _, _, emb in coll.docstore.iter_passages()])


def test_context_is_sampled_once_cached_and_used_for_documents(cde_coll: Any, tiny_cde_dir: Path) -> None:
    store, coll, jobs, embedders = cde_coll
    assert _ingest(store, jobs, embedders, DOCS) == JobStatus.SUCCEEDED
    ctx = current_context(coll)
    assert ctx is not None and ctx.vectors.shape == (4, 32) and set(ctx.doc_ids) <= {d["id"] for d in DOCS}
    snap = coll.view()
    assert snap.context is not None and snap.context.id == ctx.id and snap.manifest["context"] == ctx.id
    # Every stored vector is the document encoded with that context.
    emb: CdeEmbedder = embedders.get(str(tiny_cde_dir))  # type: ignore[assignment]
    texts = [t for _, ts, _ in coll.docstore.iter_passages() for t in ts]
    np.testing.assert_allclose(_stored_vectors(coll), emb.encode_documents(texts, context=ctx), atol=1e-5)
    # A second job reuses the cached context (the corpus grew by 1/8 only).
    assert _ingest(store, jobs, embedders, MORE[:1]) == JobStatus.SUCCEEDED
    assert current_context(coll).id == ctx.id  # type: ignore[union-attr]


def test_a_small_corpus_is_sampled_with_replacement(cde_coll: Any) -> None:
    store, coll, jobs, embedders = cde_coll
    assert _ingest(store, jobs, embedders, DOCS[:2]) == JobStatus.SUCCEEDED
    ctx = current_context(coll)
    assert ctx is not None and len(ctx.doc_ids) == 4 and set(ctx.doc_ids) <= {"d0", "d1"}


def test_queries_use_the_snapshot_context_and_m1_never_runs_at_query_time(
    cde_coll: Any, tiny_cde_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, coll, jobs, embedders = cde_coll
    _ingest(store, jobs, embedders, DOCS)
    emb: CdeEmbedder = embedders.get(str(tiny_cde_dir))  # type: ignore[assignment]
    calls = {"m1": 0}
    real = emb.model.embed_context

    def spy(*a: Any, **kw: Any) -> Any:
        calls["m1"] += 1
        return real(*a, **kw)

    monkeypatch.setattr(emb.model, "embed_context", spy)
    res = search_batch(collection=coll, embedder=emb, queries=["document 3 topic0"], k=3, mode="dense")
    assert calls["m1"] == 0 and len(res[0].hits) == 3
    want = emb.encode_queries(["document 3 topic0"], context=coll.view().context)
    got = coll.view().dense(want, 3, False, 0)
    assert [h.passage_id for h in res[0].hits][0] == int(got[0][0][0])


def test_drift_refreshes_the_context_in_a_new_generation_while_the_old_one_serves(
    cde_coll: Any, tiny_cde_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, coll, jobs, embedders = cde_coll
    _ingest(store, jobs, embedders, DOCS)
    old = current_context(coll)
    assert old is not None
    emb: CdeEmbedder = embedders.get(str(tiny_cde_dir))  # type: ignore[assignment]
    seen: list[str | None] = []
    real = gen_sync.prepare_documents

    def searching_prepare(*args: Any, **kwargs: Any) -> Any:
        # Mid-refresh: searches still run, on the serving generation and its old context.
        serving = store.get("c1")
        seen.append(serving.view().context.id if serving.view().context else None)
        assert search_batch(collection=serving, embedder=emb, queries=["topic1"], k=2, mode="hybrid")[0].hits
        return real(*args, **kwargs)

    monkeypatch.setattr(gen_sync, "PAGE", 3)
    monkeypatch.setattr(gen_sync, "prepare_documents", searching_prepare)
    assert drift(coll, old) == 0.0
    assert _ingest(store, jobs, embedders, MORE, context_refresh_fraction=0.5) == JobStatus.SUCCEEDED
    assert len(seen) >= 5 and set(seen) == {old.id}  # built in several steps while the old context served
    serving = store.get("c1")
    new = current_context(serving)
    assert gens.generation_of(serving) == 1 and new is not None and new.id != old.id
    assert serving.view().context is not None and serving.view().context.id == new.id
    assert serving.docstore.count_stale(new.id) == 0 and drift(serving, new) == 0.0
    assert sorted(serving.docstore.document_ids()) == sorted(d["id"] for d in DOCS + MORE)
    texts = [t for _, ts, _ in serving.docstore.iter_passages() for t in ts]
    np.testing.assert_allclose(_stored_vectors(serving), emb.encode_documents(texts, context=new), atol=1e-5)
    (refresh,) = _reindex_jobs(jobs)
    assert refresh.status == JobStatus.SUCCEEDED and refresh.result["reason"] == "context refresh"  # type: ignore[index]
    assert gens.read_pointer(coll.root).previous == 0  # the old generation is kept for a rollback
    # A small write afterwards drifts the new generation little: no second refresh.
    assert _ingest(store, jobs, embedders, MORE[:1] + [{"id": "x", "text": "one more"}]) == JobStatus.SUCCEEDED
    assert len(_reindex_jobs(jobs)) == 1


def test_a_refresh_goes_to_the_queue_once(cde_coll: Any) -> None:
    store, coll, jobs, embedders = cde_coll
    _ingest(store, jobs, embedders, DOCS)
    queued: list[str] = []
    assert _ingest(store, jobs, embedders, MORE, context_refresh_fraction=0.5, submit=queued.append) == "succeeded"
    (job_id,) = queued
    assert jobs.get(job_id).kind == JobKind.REINDEX and jobs.get(job_id).status == JobStatus.QUEUED
    more = [{"id": f"z{i}", "text": f"a third batch {i}"} for i in range(20)]
    assert _ingest(store, jobs, embedders, more, context_refresh_fraction=0.5, submit=queued.append) == "succeeded"
    assert queued == [job_id]  # the queued refresh samples the corpus as it is when it starts
    assert run_job(job_id=job_id, jobs=jobs, collections=store, embedders=embedders) == JobStatus.SUCCEEDED
    serving = store.get("c1")
    assert gens.generation_of(serving) == 1 and len(serving.docstore.document_ids()) == len(DOCS + MORE + more)
