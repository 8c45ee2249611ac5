"""CDE collections: the corpus context is sampled once, cached, used for documents and queries, refreshed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import indexing.context as context_mod
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


def test_drift_refreshes_the_context_and_reembeds_while_the_old_snapshot_serves(
    cde_coll: Any, tiny_cde_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, coll, jobs, embedders = cde_coll
    _ingest(store, jobs, embedders, DOCS)
    old = current_context(coll)
    assert old is not None
    emb: CdeEmbedder = embedders.get(str(tiny_cde_dir))  # type: ignore[assignment]
    seen: list[str | None] = []
    real = coll.docstore.replace_many

    def searching_replace(items: Any, context_id: str) -> int:
        # Mid-refresh: searches still run, on the snapshot published before the refresh.
        snap = coll.view()
        seen.append(snap.context.id if snap.context else None)
        assert search_batch(collection=coll, embedder=emb, queries=["topic1"], k=2, mode="hybrid")[0].hits
        return real(items, context_id)

    monkeypatch.setattr(context_mod, "REEMBED_DOCS", 3)
    monkeypatch.setattr(coll.docstore, "replace_many", searching_replace)
    assert drift(coll, old) == 0.0
    assert _ingest(store, jobs, embedders, MORE, context_refresh_fraction=0.5) == JobStatus.SUCCEEDED
    new = current_context(coll)
    assert new is not None and new.id != old.id
    assert seen and set(seen) == {old.id}  # the refresh ran in several transactions, old snapshot served
    snap = coll.view()
    assert snap.context is not None and snap.context.id == new.id
    assert coll.docstore.count_stale(new.id) == 0
    texts = [t for _, ts, _ in coll.docstore.iter_passages() for t in ts]
    np.testing.assert_allclose(_stored_vectors(coll), emb.encode_documents(texts, context=new), atol=1e-5)


def test_a_crash_during_refresh_is_finished_by_the_next_commit(
    cde_coll: Any, tiny_cde_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, coll, jobs, embedders = cde_coll
    _ingest(store, jobs, embedders, DOCS)
    old_version = coll.view().version
    real = coll.docstore.replace_many
    calls = {"n": 0}

    def crash_second(items: Any, context_id: str) -> int:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("worker killed")
        return real(items, context_id)

    monkeypatch.setattr(context_mod, "REEMBED_DOCS", 3)
    monkeypatch.setattr(coll.docstore, "replace_many", crash_second)
    assert _ingest(store, jobs, embedders, MORE, context_refresh_fraction=0.5) == JobStatus.FAILED
    new = current_context(coll)
    assert new is not None and coll.docstore.count_stale(new.id) > 0  # half done
    assert coll.view().version == old_version  # nothing mixed was published
    assert "stale" in coll.check_consistency()  # the API at start-up does not publish mixed vectors either
    monkeypatch.setattr(coll.docstore, "replace_many", real)
    assert _ingest(store, jobs, embedders, MORE[:1]) == JobStatus.SUCCEEDED  # any later job finishes it
    assert coll.docstore.count_stale(new.id) == 0
    assert coll.view().context.id == new.id  # type: ignore[union-attr]
