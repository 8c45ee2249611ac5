"""A search whose collection is deleted while it runs (its files go from under it) is a 404, as it would have been
a moment later; the same fault on a collection that still exists stays a 500 (a real fault). Background work on a
collection deleted meanwhile ends without an error."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from indexing.manifest import ManifestError
from indexing.merger import BACKGROUND, wait_background
from service.api.routes import search as search_route
from tests.service.conftest import error_body, running_app, wait_job


def test_a_search_that_loses_its_collection_midway_is_a_404(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_app(tmp_path, embedder=str(tiny_embedder_dir)) as (client, app):
        state = app.state.vela
        for name in ("gone", "kept"):
            r = client.post("/index", json={"collection": name, "documents": [{"id": "a", "text": "moon tides"}]})
            assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"

        def deleted_midway(**kw: Any) -> Any:
            if kw["collection"].name == "gone":
                state.collections.delete("gone")
            raise ManifestError("m000002.json: No such file or directory")

        monkeypatch.setattr(search_route, "search_batch", deleted_midway)
        r = client.post("/search", json={"collection": "gone", "query": "tides", "mode": "bm25"})
        assert r.status_code == 404 and error_body(r)["code"] == "collection_not_found", r.text
        r = client.post("/search", json={"collection": "kept", "query": "tides", "mode": "bm25"})
        assert r.status_code == 500 and error_body(r)["code"] == "internal", r.text


def test_a_collection_deleted_right_after_its_ingest_logs_no_error(
    tmp_path: Path, tiny_embedder_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fusion choice (and merges) an ingest leaves to the background found the collection gone and logged
    "background work failed" with a traceback: an ERROR for what is no fault (indexing/merger.py)."""
    caplog.set_level(logging.INFO, logger="vela.merge")
    docs = [{"id": f"d{i}", "text": f"tides study {i}: the moon and the sea, topic {i % 7}"} for i in range(70)]
    release = threading.Event()
    with running_app(tmp_path, embedder=str(tiny_embedder_dir)) as (client, _):
        # The background thread is busy: the ingest's merge and fusion choice wait until the delete is done, as
        # they do when a DELETE follows an ingest on a loaded server.
        BACKGROUND.submit(("held", 0), lambda: release.wait(60) and None)
        try:
            r = client.post("/index", json={"collection": "short", "documents": docs})
            assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
            assert client.delete("/collections/short").status_code == 204
        finally:
            release.set()
        assert wait_background(60)
    assert [r.getMessage() for r in caplog.records if r.name == "vela.merge" and r.levelno >= logging.ERROR] == []
