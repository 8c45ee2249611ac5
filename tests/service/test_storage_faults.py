"""Storage that fails under a running server, over real HTTP: a disk that fills after the free-space check is a
507 and a filesystem that refuses writes a 503, in the error shape, with nothing stored (not a 500); a job store
removed under the server refuses writes instead of recording them in a file no restart would read."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.jobs import JobStore
from service import capacity, errors
from service.errors import internal_error, storage_fault
from tests.service.conftest import error_body, running_app, wait_job

DOC = {"id": "b", "text": "sea tides"}


@pytest.fixture
def app(tmp_path: Path, tiny_embedder_dir: Path) -> Iterator[tuple[httpx.Client, Any]]:
    with running_app(tmp_path, embedder=str(tiny_embedder_dir)) as (client, app):
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "a", "text": "moon tides"}]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        yield client, app.state.vela


@pytest.mark.parametrize(
    ("fault", "status", "words"),
    [
        (sqlite3.OperationalError("database or disk is full"), 507, "disk is full"),
        (OSError(errno.ENOSPC, "No space left on device"), 507, "disk is full"),
        (sqlite3.OperationalError("attempt to write a readonly database"), 503, "cannot be written"),
        (OSError(errno.EROFS, "Read-only file system"), 503, "cannot be written"),
    ],
)
def test_a_write_that_meets_a_full_or_unwritable_disk_is_answered_in_the_error_shape(
    app: tuple[httpx.Client, Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fault: Exception,
    status: int,
    words: str,
) -> None:
    client, state = app

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise fault

    monkeypatch.setattr(state.jobs, "create", fails)
    jobs_before = client.get("/jobs").json()
    r = client.post("/index", json={"collection": "c", "documents": [DOC]})
    assert r.status_code == status, r.text
    err = error_body(r)
    assert err["code"] == ("insufficient_storage" if status == 507 else "unavailable")
    assert words in err["message"] and "nothing was stored" in err["message"]
    logged = [r for r in caplog.records if r.name == "vela.service" and r.levelname in ("WARNING", "ERROR")]
    assert [r.getMessage() for r in logged] == ["storage fault"] and logged[0].exc_info is None  # no bug: no trace
    monkeypatch.undo()
    assert client.get("/jobs").json() == jobs_before
    assert client.post("/search", json={"collection": "c", "query": "tides", "mode": "bm25"}).status_code == 200


def test_sqlites_disk_io_error_on_a_nearly_full_disk_is_a_507(
    app: tuple[httpx.Client, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under about 64 KiB free, SQLite says "disk I/O error" (a file it could not grow), not "disk is full".
    client, state = app
    free = {"bytes": 10 * 1024}
    monkeypatch.setattr(errors, "free_disk", lambda path: (free["bytes"], 10**12))
    monkeypatch.setattr(capacity, "free_disk", lambda path: (10**12, 10**12))  # past the free-space check

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(state.jobs, "create", fails)
    r = client.post("/index", json={"collection": "c", "documents": [DOC]})
    assert r.status_code == 507 and error_body(r)["code"] == "insufficient_storage", r.text
    free["bytes"] = 10**9  # room left: the filesystem itself is failing
    r = client.post("/index", json={"collection": "c", "documents": [DOC]})
    assert r.status_code == 503 and error_body(r)["code"] == "unavailable", r.text


def test_faults_are_found_down_the_chain_and_a_bug_stays_a_500() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("faiss::write_index failed") from inner
    except RuntimeError as outer:
        assert storage_fault(outer) == "full"
    assert storage_fault(ValueError("x")) is None
    assert internal_error(KeyError("bug")).status_code == 500


def test_a_job_store_removed_under_the_server_refuses_writes_and_readyz_says_so(
    app: tuple[httpx.Client, Any],
) -> None:
    client, state = app
    assert client.get("/readyz").json()["queue"] == "ok"
    path: Path = state.jobs.path
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    r = client.post("/index", json={"collection": "c", "documents": [DOC]})
    assert r.status_code == 503, r.text
    err = error_body(r)
    assert err["code"] == "unavailable" and "jobs.sqlite3" in err["message"] and "restarts" in err["message"]
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["queue"] == "job_store_moved"
    assert client.post("/search", json={"collection": "c", "query": "tides", "mode": "bm25"}).status_code == 200
    # A store opened on the new file (what a restart does) takes jobs again.
    assert JobStore(path).unfinished() == []
