"""GET /jobs: jobs newest first, filtered by collection (an alias means its collection), status and kind, in pages
that neither overlap nor skip; no payloads; bad parameters are 422s in the error shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.service.conftest import running_app, wait_job


def _all(client: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    """Every page of GET /jobs with these parameters, in order."""
    jobs: list[dict[str, Any]] = []
    cursor = None
    while True:
        r = client.get("/jobs", params={**params, **({"cursor": cursor} if cursor else {})})
        assert r.status_code == 200, r.text
        jobs += r.json()["jobs"]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return jobs


def test_jobs_are_listed_newest_first_filtered_and_paged(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_app(tmp_path / "data", embedder=str(tiny_embedder_dir)) as (client, _):
        made = []
        for name in ("a", "b", "a"):
            r = client.post("/index", json={"collection": name, "documents": [{"id": "d", "text": "tides " + name}]})
            made.append(wait_job(client, r.json()["job_id"])["id"])
        r = client.delete("/collections/a/documents/d")
        made.append(wait_job(client, r.json()["job_id"])["id"])
        assert client.put("/aliases/first", json={"collection": "a"}).status_code == 200

        every = client.get("/jobs").json()
        assert [j["id"] for j in every["jobs"]] == made[::-1] and every["next_cursor"] is None
        assert "payload" not in every["jobs"][0] and every["jobs"][-1]["status"] == "succeeded"
        assert [j["id"] for j in _all(client, limit=1)] == made[::-1]  # one a page: the same jobs, once each
        assert [j["id"] for j in _all(client, collection="first")] == [made[3], made[2], made[0]]
        assert [j["kind"] for j in _all(client, kind="delete")] == ["delete"]
        assert len(_all(client, kind=["delete", "upsert"], status="succeeded")) == 4
        assert _all(client, status=["queued", "running"]) == []
        assert _all(client, collection="nosuch") == []

        for params, code in [
            ({"cursor": "not-a-cursor"}, "invalid_cursor"),
            ({"status": "done"}, "invalid_request"),
            ({"kind": "nosuch"}, "invalid_request"),
            ({"limit": 0}, "invalid_request"),
            ({"limit": 1001}, "invalid_request"),
        ]:
            r = client.get("/jobs", params=params)
            assert r.status_code == 422 and r.json()["error"]["code"] == code, (params, r.text)
