"""What is refused while a reindex runs: a promote sent during it names the unfinished job, as a rollback does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import indexing.gen_sync
from models.registry import ModelRegistry
from tests.service.conftest import error_body, running_app, wait_job

DOCS = [{"id": f"d{i}", "text": f"tides study {i}: the moon pulls the sea, and the shore answers"} for i in range(8)]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    data = tmp_path_factory.mktemp("reindex-options") / "data"
    ModelRegistry(data / "models").register("tiny", tiny_embedder_dir)
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        yield client


def _collection(client: httpx.Client, name: str) -> None:
    r = client.post("/index", json={"collection": name, "documents": DOCS})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"


def test_a_promote_during_a_reindex_names_the_job(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rollback said which job was unfinished; promote said there was nothing to promote, as if none ran."""
    _collection(client, "busy")
    release, started = threading.Event(), threading.Event()
    real = indexing.gen_sync.prepare_documents

    def held(*args: Any, **kwargs: Any) -> Any:  # the reindex stays running until the test lets it go
        started.set()
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(indexing.gen_sync, "prepare_documents", held)
    r = client.post("/collections/busy/reindex", json={"embedder": "tiny", "reencode": True})
    assert r.status_code == 202, r.text
    job = r.json()["job_id"]
    try:
        assert started.wait(60)
        for switch in ("promote", "rollback"):
            refused = client.post(f"/collections/busy/{switch}")
            err = error_body(refused)
            assert refused.status_code == 409 and err["code"] == "conflict", refused.text
            assert f"has a reindex job ({job}) not finished yet" in err["message"], err
    finally:
        release.set()
    assert wait_job(client, job)["status"] == "succeeded"
