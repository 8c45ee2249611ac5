"""A name a restore is making is held, and what a snapshot or restore job never made is not shown. An index
request that would create a collection of that name, or an alias that would take it, while the restore is queued
or running is refused (409), instead of the restore failing once its work is done."""

from __future__ import annotations

from pathlib import Path

from indexing.jobs import JobKind, JobStatus
from tests.service.conftest import running_app
from tests.service.document_helpers import index


def test_index_or_an_alias_into_a_name_being_restored_is_409_until_the_restore_ends(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    with running_app(tmp_path / "data", embedder=str(tiny_embedder_dir)) as (client, app):
        jobs = app.state.vela.jobs
        # a restore into "held" under way (recorded as running in another process, so this one's runner leaves it)
        job = jobs.create(collection="held", kind=JobKind.RESTORE, payload=[{"into": "held"}], running_in="elsewhere")
        r = client.post("/index", json={"collection": "held", "documents": [{"id": "a", "text": "tides"}]})
        assert r.status_code == 409 and r.json()["error"]["code"] == "conflict", r.text
        assert "restore" in r.json()["error"]["message"] and job.id in r.json()["error"]["message"]
        assert client.get("/collections/held").status_code == 404  # nothing was made
        # An alias may not take the name either: the restore would fail at its end, its work lost.
        index(client, "other", [{"id": "b", "text": "moon"}])
        r = client.put("/aliases/held", json={"collection": "other"})
        assert r.status_code == 409 and job.id in r.json()["error"]["message"], r.text
        assert client.get("/aliases/held").status_code == 404
        jobs.finish(job.id, JobStatus.CANCELLED)  # the restore ends
        index(client, "held", [{"id": "a", "text": "tides"}])  # once the restore has ended, the name is free
        assert client.post("/collections/held/count").json()["count"] == 1


def test_a_cancelled_or_failed_snapshot_job_shows_no_result(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    """The job records the snapshot's name before writing it: once cancelled or failed, that file never was."""
    with running_app(tmp_path / "data", embedder=str(tiny_embedder_dir)) as (client, app):
        jobs = app.state.vela.jobs
        for kind, end in ((JobKind.SNAPSHOT, "cancel"), (JobKind.RESTORE, "fail")):
            job = jobs.create(collection="c", kind=kind, payload=[{}])
            jobs.set_result(job.id, {"snapshot": "c-20260101T000000-abcdef.tar"})
            if end == "cancel":
                jobs.request_cancel(job.id)
            else:
                jobs.fail_if_queued(job.id, "broken")
            shown = client.get(f"/jobs/{job.id}").json()
            assert shown["status"] in ("cancelled", "failed") and shown["result"] is None, shown
