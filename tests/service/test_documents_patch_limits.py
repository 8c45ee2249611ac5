"""Patches queued one behind another cannot grow a document's metadata past the server's limits: each passes the
check made when it is sent (against the metadata stored then), but the job checks the merge it would store against
the same VELA_MAX_METADATA_* values, and one that would pass them fails, leaving the document as it was."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.service.conftest import running_app, wait_job
from tests.service.document_helpers import index

Server = tuple[httpx.Client, FastAPI]
LIMIT = 2_000  # VELA_MAX_METADATA_BYTES of this server: well below the default, so the server's value is the one used


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("vela-patch-limits")
    with running_app(data_dir, embedder=str(tiny_embedder_dir), max_metadata_bytes=LIMIT) as pair:
        yield pair


def _stored(client: httpx.Client, name: str, doc_id: str) -> dict[str, Any]:
    r = client.get(f"/collections/{name}/documents/{doc_id}")
    assert r.status_code == 200, r.text
    return dict(r.json()["metadata"])


def test_queued_merges_past_the_metadata_limit_fail_and_write_nothing(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, app = server
    name = "patch-limits"
    index(client, name, [{"id": "d2", "text": "alpha beta"}])
    value = "x" * 800  # one key fits; the stored one and two more do not (about 2,400 bytes)
    r = client.patch(f"/collections/{name}/documents/d2", json={"metadata": {"k": value}, "mode": "replace"})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"

    # The write lane is held by an upsert whose encoding waits, so the patches queue behind it.
    state = app.state.vela
    embedder = state.embedders.get(state.collections.get(name).settings.embedder)
    release, started = threading.Event(), threading.Event()
    original = embedder.encode_documents

    def held(texts: Any, **kwargs: Any) -> Any:
        started.set()
        assert release.wait(60)
        return original(texts, **kwargs)

    monkeypatch.setattr(embedder, "encode_documents", held)
    busy = client.post("/index", json={"collection": name, "documents": [{"id": "other", "text": "gamma"}]})
    assert busy.status_code == 202, busy.text
    try:
        assert started.wait(60)
        answers = [
            client.patch(f"/collections/{name}/documents/d2", json={"metadata": {key: value}, "mode": "merge"})
            for key in ("a", "b", "c")
        ]
        assert [a.status_code for a in answers] == [202, 202, 202], [a.text for a in answers]
    finally:
        release.set()
    assert wait_job(client, busy.json()["job_id"])["status"] == "succeeded"
    a, b, c = (wait_job(client, x.json()["job_id"]) for x in answers)

    assert a["status"] == "succeeded" and a["result"] == {"patched": 1, "unchanged": 0, "not_found": 0}
    for job in (b, c):  # each would store three keys of 800 characters: refused when it runs, nothing written
        assert job["status"] == "failed", job
        assert "d2" in job["error"] and f"the limit is {LIMIT}" in job["error"], job["error"]
        assert "nothing was written" in job["error"]
    assert _stored(client, name, "d2") == {"k": value, "a": value}
