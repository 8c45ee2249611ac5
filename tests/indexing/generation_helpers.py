"""What tests/indexing/test_generations.py and test_generation_promotion.py share: a one-collection set-up holding
DOCS, the jobs run on it as the job runner runs them, and a spy on what a generation sync sends to the encoder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import indexing.gen_sync as gen_sync
from indexing.chunking import ChunkingParams
from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.store import CollectionStore
from models import EmbedderCache

DOCS = [{"id": f"d{i}", "title": f"T{i}", "text": f"tides and the moon number {i} topic{i % 4}"} for i in range(40)]


def make_env(tmp_path: Path, embedder_dir: Path) -> dict[str, Any]:
    """The collection "c" embedded with `embedder_dir`, holding DOCS; "root" is its folder."""
    store = CollectionStore(tmp_path)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    embedders = EmbedderCache()
    dim = embedders.get(str(embedder_dir)).dim
    settings = CollectionSettings(
        name="c", embedder=str(embedder_dir), dim=dim, chunking=ChunkingParams(max_tokens=32, overlap=8)
    )
    store.create(settings)
    env = {"store": store, "jobs": jobs, "embedders": embedders, "root": tmp_path / "collections" / "c"}
    assert run_one_job(env, JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    return env


def run_one_job(env: dict[str, Any], kind: JobKind, payload: list[Any]) -> JobStatus:
    """One job on the collection "c", created and run to its end."""
    job = env["jobs"].create(collection="c", kind=kind, payload=payload)
    return run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])


def run_reindex(env: dict[str, Any], embedder: Path, **options: Any) -> str:
    """A reindex of "c" to `embedder`, run to its end; its job id (its status is the caller's to check)."""
    spec = {"collection": "c", "embedder": str(embedder), "embedder_name": "two", **options}
    job = env["jobs"].create(collection="c", kind=JobKind.REINDEX, payload=[spec])
    run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])
    return str(job.id)


def encoded_ids(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the documents a sync sends to the encoder from now on."""
    ids: list[str] = []
    real = gen_sync.prepare_documents
    monkeypatch.setattr(
        gen_sync, "prepare_documents", lambda docs, *a, **kw: ids.extend(d["id"] for d in docs) or real(docs, *a, **kw)
    )
    return ids
