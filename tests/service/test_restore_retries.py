"""A restore or an upload sent again (a client that lost the answer) gets the job the first one made, over real
HTTP: while it runs, after it succeeded, and from several uploads sent at once; nothing is restored or stored twice.
What cannot be recognised as the same request (another snapshot, no sha256, a failed first try, a collection
deleted since) is answered as before."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.merger import wait_background
from service.snapshot_uploads import SWEEP_LOCK
from tests.service.conftest import running_app, wait_job
from tests.service.document_helpers import index, run_job
from tests.snapshot_corpus import documents

TAR = {"content-type": "application/x-tar"}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[tuple[httpx.Client, Path]]:
    data = tmp_path_factory.mktemp("retries") / "data"
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        yield client, data


def _restore_jobs(data: Path, into: str) -> list[str]:
    with sqlite3.connect(data / "jobs.sqlite3") as conn:
        rows = conn.execute("SELECT id FROM jobs WHERE collection = ? AND kind = 'restore'", (into,)).fetchall()
    return [r[0] for r in rows]


def _snapshot(client: httpx.Client, name: str, count: int) -> dict[str, Any]:
    index(client, name, documents(count))
    wait_background(60)
    return dict(run_job(client, client.post(f"/collections/{name}/snapshots"))["result"])


def _error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code, r.text


def test_a_restore_sent_again_gets_its_own_job(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    taken = _snapshot(client, "source", 12)
    url = f"/collections/source/snapshots/{taken['snapshot']}/restore"
    first = client.post(url, json={"into": "copy"})
    again = client.post(url, json={"into": "copy"})  # queued or running: the same job
    assert first.status_code == again.status_code == 202, again.text
    assert again.json()["job_id"] == first.json()["job_id"]
    job = wait_job(client, first.json()["job_id"])
    assert job["status"] == "succeeded" and job["result"]["sha256"] == taken["sha256"]
    after = client.post(url, json={"into": "copy"})  # succeeded, and "copy" is still what it made
    assert after.status_code == 202 and after.json()["job_id"] == job["id"]
    assert _restore_jobs(data, "copy") == [job["id"]]
    assert client.get("/collections/copy").json()["documents"] == 12
    # Another snapshot into that name is not the same request: 409 as before.
    other = _snapshot(client, "source", 14)["snapshot"]
    r = client.post(f"/collections/source/snapshots/{other}/restore", json={"into": "copy"})
    _error(r, 409, "conflict")
    # Deleted since: sending it again restores it again, under a new job.
    assert client.delete("/collections/copy").status_code in (200, 202, 204)
    redo = run_job(client, client.post(url, json={"into": "copy"}))
    assert redo["id"] != job["id"] and client.get("/collections/copy").json()["documents"] == 12
    # Written since: the collection is no longer what the snapshot holds, so the same request is a new restore
    # into a taken name (409), not the earlier job's success.
    index(client, "copy", [{"id": "extra", "text": "written after the restore"}])
    _error(client.post(url, json={"into": "copy"}), 409, "conflict")
    assert client.get("/collections/copy").json()["documents"] == 13


def test_an_upload_sent_again_gets_its_own_job_and_stores_nothing(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    taken = _snapshot(client, "travel", 10)
    body = client.get(f"/collections/travel/snapshots/{taken['snapshot']}").content
    params = {"into": "moved", "sha256": taken["sha256"].upper()}  # any case, as the listing's is taken
    with ThreadPoolExecutor(6) as pool:  # sent at once, as a client's retries after a timeout may overlap
        answers = list(
            pool.map(lambda _: client.post("/snapshots/upload", params=params, content=body, headers=TAR), range(6))
        )
    assert {r.status_code for r in answers} == {202}, [r.text for r in answers]
    ids = {r.json()["job_id"] for r in answers}
    assert len(ids) == 1
    job = wait_job(client, ids.pop())
    assert job["status"] == "succeeded" and _restore_jobs(data, "moved") == [job["id"]]
    later = client.post("/snapshots/upload", params=params, content=body, headers=TAR)
    assert later.status_code == 202 and later.json()["job_id"] == job["id"]
    assert [p for p in (data / "snapshots" / ".uploads").iterdir() if p.name != SWEEP_LOCK] == []
    assert client.get("/collections/moved").json()["documents"] == 10
    # Without a sha256 there is nothing to compare: the name is taken.
    _error(client.post("/snapshots/upload", params={"into": "moved"}, content=body, headers=TAR), 409, "conflict")


def test_a_failed_restore_is_not_matched(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    taken = _snapshot(client, "plain", 6)
    body = client.get(f"/collections/plain/snapshots/{taken['snapshot']}").content
    wrong = {"into": "damaged", "sha256": "0" * 64}  # not the file's: the restore fails
    failed = run_job(client, client.post("/snapshots/upload", params=wrong, content=body, headers=TAR), "failed")
    second = run_job(client, client.post("/snapshots/upload", params=wrong, content=body, headers=TAR), "failed")
    assert second["id"] != failed["id"]
    right = run_job(
        client, client.post("/snapshots/upload", params={"into": "damaged", "sha256": taken["sha256"]}, content=body)
    )
    assert client.get("/collections/damaged").json()["documents"] == 6
    assert len(_restore_jobs(data, "damaged")) == 3 and right["id"] not in (failed["id"], second["id"])
