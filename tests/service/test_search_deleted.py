"""A search whose collection is deleted while it runs (its files go from under it) is a 404, as it would have been
a moment later; the same fault on a collection that still exists stays a 500 (a real fault)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexing.manifest import ManifestError
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
