"""POST /jobs/{id}/retry: a failed job runs again with its documents; any other job is a 409."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.conftest import running_server, wait_job


def test_retry_runs_a_failed_job_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import indexing.ingest as ingest_mod

    real = ingest_mod.commit_collection
    calls = {"n": 0}

    def fail_once(*args: object, **kw: object) -> int:
        calls["n"] += 1
        if calls["n"] == 2:  # the first commit creates nothing; the job's own commit fails once
            raise OSError(28, "No space left on device (injected)")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ingest_mod, "commit_collection", fail_once)
    with running_server(tmp_path) as client:
        docs = [{"id": f"d{i}", "text": f"document {i} about tides"} for i in range(5)]
        client.post("/index", json={"collection": "c", "documents": docs[:1]})
        r = client.post("/index", json={"collection": "c", "documents": docs})
        job = wait_job(client, r.json()["job_id"])
        assert job["status"] == "failed" and "No space left" in job["error"], job
        r = client.post(f"/jobs/{job['id']}/retry")
        assert r.status_code == 202 and r.json()["status"] == "queued" and r.json()["error"] is None, r.text
        again = wait_job(client, job["id"])
        assert again["status"] == "succeeded" and again["attempts"] == 2
        assert client.get("/collections/c").json()["documents"] == 5
        r = client.post(f"/jobs/{job['id']}/retry")
        assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
        assert client.post("/jobs/nope/retry").status_code == 404
