"""While documents already indexed are being written again (an upsert of new text, a patch), a search still finds
them as the published index ranks them, with the text and metadata that index was built from, until the commit
that replaces them publishes; a document deleted meanwhile is not shown. Counts and searches agree throughout."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from indexing.docstore import DocStore, StoredDocument
from tests.service.conftest import running_app, wait_job


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[tuple[httpx.Client, FastAPI]]:
    data_dir = tmp_path_factory.mktemp("rewrite")
    with running_app(data_dir, embedder=str(tiny_embedder_dir), ingest_batch_size=2) as pair:
        yield pair


def _docs(version: str) -> list[dict[str, Any]]:
    return [{"id": f"d{i}", "text": f"tides and the moon {version} {i}", "metadata": {"v": version}} for i in range(4)]


def _search(client: httpx.Client) -> list[dict[str, Any]]:
    r = client.post("/search", json={"collection": "rw", "query": "tides moon", "mode": "dense", "k": 10})
    assert r.status_code == 200, r.text
    return list(r.json()["hits"])


def test_documents_being_rewritten_stay_found_as_the_index_has_them(
    server: tuple[httpx.Client, FastAPI], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, app = server
    r = client.post("/index", json={"collection": "rw", "documents": _docs("old")})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    state = app.state.vela
    embedder = state.embedders.get(state.collections.get("rw").settings.embedder)
    original, calls = embedder.encode_documents, []
    release, held_now = threading.Event(), threading.Event()

    def held(texts: Any, **kwargs: Any) -> Any:
        calls.append(len(texts))
        if len(calls) == 2:  # the first batch of the rewrite is stored, not yet committed
            held_now.set()
            assert release.wait(60)
        return original(texts, **kwargs)

    monkeypatch.setattr(embedder, "encode_documents", held)
    job = client.post("/index", json={"collection": "rw", "documents": _docs("new")}).json()["job_id"]
    try:
        assert held_now.wait(60)
        during = _search(client)
        assert sorted(h["id"] for h in during) == ["d0", "d1", "d2", "d3"]  # none lost (d0 and d1 were rewritten)
        assert all(h["metadata"] == {"v": "old"} and " old " in h["text"] for h in during)
        assert client.post("/collections/rw/count", json={}).json()["count"] == 4
    finally:
        release.set()
    assert wait_job(client, job)["status"] == "succeeded"
    after = _search(client)
    assert sorted(h["id"] for h in after) == ["d0", "d1", "d2", "d3"]
    assert all(h["metadata"] == {"v": "new"} and " new " in h["text"] for h in after)


def test_the_old_version_is_read_until_purged_and_a_deleted_document_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import indexing.docstore as docstore_mod

    store = DocStore(tmp_path / "docs.sqlite3")
    emb = np.ones((1, 4), np.float32)

    def doc(doc_id: str, text: str, md: dict[str, Any]) -> StoredDocument:
        return StoredDocument(doc_id, "T", text, md, "h" + text, [(0, len(text))], emb)

    store.upsert([doc("a", "first text", {"v": 1}), doc("b", "other", {})])
    (pa, pb) = sorted(store.passages([1, 2]))
    store.upsert([doc("a", "second", {"v": 2})])
    old = store.passages([pa])[pa]
    assert (old.doc_id, old.text, old.metadata, old.title) == ("a", "first text", {"v": 1}, "T")
    store.delete(["b"])
    assert pb not in store.passages([pb])  # deleted: not shown, though its old passage is recorded
    store.forget_dead(store.dead_pids())  # the commit published: kept for the grace period
    assert pa in store.passages([pa])
    monkeypatch.setattr(docstore_mod, "REPLACED_GRACE_S", -1.0)
    store.forget_dead(np.empty(0, np.int64))  # a later commit: purged
    assert pa not in store.passages([pa])
    # A store written to no more purges them at start-up (its consistency check), past the grace period too.
    monkeypatch.setattr(docstore_mod, "REPLACED_GRACE_S", 300.0)
    store.upsert([doc("a", "third", {"v": 3})])
    store.forget_dead(store.dead_pids())
    count = "SELECT count(*) FROM replaced_passages"
    assert store._conn().execute(count).fetchone()[0] == 1  # type: ignore[attr-defined]
    from indexing.consistency import check_shard

    class Shard:  # what the start-up check reads of a shard; its manifest is missing: it rebuilds, as at creation
        root, segments_dir, docstore = tmp_path, tmp_path / "segments", store

        def commit(self) -> int:
            return 0

        def index_writer(self) -> Any:
            raise RuntimeError("not reached: the purge comes first")

    monkeypatch.setattr(docstore_mod, "REPLACED_GRACE_S", -1.0)  # the grace period has passed
    with pytest.raises(RuntimeError, match="the purge comes first"):
        check_shard(Shard())
    assert store._conn().execute(count).fetchone()[0] == 0  # type: ignore[attr-defined]
