"""Room for new work, over real HTTP: with the data disk below its free-space floor (simulated by a floor above
the free space) every request that would write is refused with 507 before anything is stored, while searches and
reads go on; with VELA_MAX_QUEUED_JOBS jobs unfinished a new one gets 503 queue_full with Retry-After."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.jobs import JobKind, JobStatus
from service.capacity import free_disk
from tests.service.conftest import error_body, running_app, wait_job


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[tuple[httpx.Client, Any]]:
    with running_app(tmp_path_factory.mktemp("capacity"), embedder=str(tiny_embedder_dir)) as (client, app):
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "a", "text": "moon tides"}]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        snap = client.post("/collections/c/snapshots")
        assert wait_job(client, snap.json()["job_id"])["status"] == "succeeded"
        yield client, app.state.vela


@pytest.fixture
def low_disk(app: tuple[httpx.Client, Any]) -> Iterator[httpx.Client]:
    """The floor set 1 GiB above what the data disk has free: the disk counts as nearly full."""
    client, state = app
    free, _ = free_disk(state.settings.data_dir)
    before = state.settings.min_free_disk_mb
    state.settings.min_free_disk_mb = free // (1024 * 1024) + 1024
    try:
        yield client
    finally:
        state.settings.min_free_disk_mb = before


def _insufficient(r: httpx.Response) -> None:
    assert r.status_code == 507, r.text
    err = error_body(r)
    assert err["code"] == "insufficient_storage"
    assert "VELA_MIN_FREE_DISK_MB" in err["message"] and "searches go on" in err["message"]


def test_a_nearly_full_disk_refuses_every_write_and_keeps_searches(low_disk: httpx.Client) -> None:
    client = low_disk
    jobs_before = client.get("/jobs").json()
    _insufficient(client.post("/index", json={"collection": "c", "documents": [{"id": "b", "text": "sea"}]}))
    # a write that would make its collection makes none
    _insufficient(client.post("/index", json={"collection": "new", "documents": [{"id": "b", "text": "sea"}]}))
    assert client.get("/collections/new").status_code == 404
    _insufficient(client.post("/collections/c/delete", json={"ids": ["a"]}))
    _insufficient(client.post("/collections/c/snapshots"))
    name = client.get("/collections/c/snapshots").json()["snapshots"][0]["name"]
    _insufficient(client.post(f"/collections/c/snapshots/{name}/restore", json={"into": "c2"}))
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w"):
        pass
    _insufficient(client.post("/snapshots/upload", params={"into": "up"}, content=tar.getvalue()))
    _insufficient(client.put("/collections/empty"))  # it queues no job, but it writes the collection's files
    assert client.get("/collections/empty").status_code == 404
    assert client.get("/jobs").json() == jobs_before  # nothing was queued

    hits = client.post("/search", json={"collection": "c", "query": "moon", "mode": "bm25"})
    assert hits.status_code == 200 and [h["id"] for h in hits.json()["hits"]] == ["a"]
    assert client.get("/collections/c/documents/a").status_code == 200
    assert client.get("/healthz").status_code == 200


def test_writes_are_taken_again_once_the_disk_has_room(app: tuple[httpx.Client, Any]) -> None:
    client, _ = app
    r = client.post("/index", json={"collection": "c", "documents": [{"id": "c", "text": "tides"}]})
    assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"


def test_a_full_queue_is_503_with_retry_after(app: tuple[httpx.Client, Any]) -> None:
    client, state = app
    before = state.settings.max_queued_jobs
    # A job another process runs: unfinished, and no runner of this server takes it.
    held = state.jobs.create(collection="c", kind=JobKind.UPSERT, payload=[], running_in="elsewhere")
    state.settings.max_queued_jobs = 1
    try:
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "d", "text": "sea"}]})
        assert r.status_code == 503 and r.headers["Retry-After"] == "5"
        err = error_body(r)
        assert err["code"] == "queue_full" and "VELA_MAX_QUEUED_JOBS" in err["message"]
        assert client.post("/collections/c/snapshots").status_code == 503
        # Creating an empty collection queues no job: a full queue does not hold it up (a disk floor would).
        made = client.put("/collections/made-while-full")
        assert made.status_code == 201, made.text
        state.jobs.finish(held.id, JobStatus.SUCCEEDED)
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "d", "text": "sea"}]})
        assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    finally:
        state.settings.max_queued_jobs = before
