"""What tests/indexing/test_snapshots.py and test_snapshot_restore.py share: a collection store, job store and
embedders in one folder, and the jobs that fill a collection, snapshot it and restore it, run as the job runner
runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.snapshot_format import find_snapshot
from indexing.store import CollectionStore
from models import EmbedderCache
from tests.snapshot_corpus import SCHEMA, documents

DOCS = documents(30)
QUERIES = ["tides study", "volcano notes", "insulin number 7", "graphene"]


class Killed(BaseException):
    """Stands for a kill: nothing the job runner catches."""


def make_env(tmp_path: Path, embedder_dir: Path) -> dict[str, Any]:
    store = CollectionStore(tmp_path)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    embedders = EmbedderCache()
    return {"store": store, "jobs": jobs, "embedders": embedders, "model": str(embedder_dir), "dir": tmp_path}


def make_collection(env: dict[str, Any], name: str, shards: int = 1) -> None:
    """The collection `name`, holding DOCS under SCHEMA."""
    dim = env["embedders"].get(env["model"]).dim
    env["store"].create(CollectionSettings(name=name, embedder=env["model"], dim=dim, shards=shards))
    assert run_one_job(env, name, JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    assert run_one_job(env, name, JobKind.SCHEMA, [SCHEMA]) == JobStatus.SUCCEEDED


def run_one_job(env: dict[str, Any], collection: str, kind: JobKind, payload: list[Any]) -> JobStatus:
    """One job, created and run to its end; its id is env["last"]."""
    job = env["jobs"].create(collection=collection, kind=kind, payload=payload)
    env["last"] = job.id
    return run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])


def take_snapshot(env: dict[str, Any], collection: str) -> str:
    """A snapshot of `collection` into env["dir"]/snapshots; its name."""
    spec = {"collection": collection, "dir": str(env["dir"] / "snapshots"), "embedder": env["model"]}
    status = run_one_job(env, collection, JobKind.SNAPSHOT, [{**spec, "embedder_name": "unregistered"}])
    job = env["jobs"].get(env["last"])
    assert status == JobStatus.SUCCEEDED, job.error
    return str(job.result["snapshot"])


def restore_snapshot(env: dict[str, Any], collection: str, name: str, into: str, **spec: Any) -> JobStatus:
    """Restore `collection`'s snapshot `name` as the new collection `into`."""
    path, info = find_snapshot(env["dir"] / "snapshots", collection, name)
    payload = {"snapshot": str(path), "sha256": info.sha256, "into": into, "embedder": env["model"], **spec}
    return run_one_job(env, into, JobKind.RESTORE, [payload])


def kill_once(monkeypatch: pytest.MonkeyPatch, target: Any, attribute: str) -> None:
    """`target.attribute` raises Killed the first time it is called, then works."""
    real = getattr(target, attribute)
    calls: list[int] = []

    def dies(*args: Any, **kwargs: Any) -> Any:
        if not calls:
            calls.append(1)
            raise Killed()
        return real(*args, **kwargs)

    monkeypatch.setattr(target, attribute, dies)
