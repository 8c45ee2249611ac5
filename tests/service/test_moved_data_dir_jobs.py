"""A data directory moved (a new mount point, a copy restored elsewhere) while a snapshot job is queued: the job
writes its snapshot where the server lists them, in the data directory it now runs against, and nothing at the old
path; a restore job queued before the move finds its tar in the new place."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from service.settings import Settings
from service.snapshot_api import submit_restore, submit_snapshot
from service.state import build_state
from tests.service.conftest import running_app, wait_job


def test_queued_snapshot_and_restore_jobs_follow_a_moved_data_dir(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    old, new = tmp_path / "old" / "data", tmp_path / "new" / "data"
    with running_app(old, embedder=str(tiny_embedder_dir)) as (client, _):
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "d", "text": "tides"}]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        r = client.post("/collections/c/snapshots")
        taken = wait_job(client, r.json()["job_id"])["result"]["snapshot"]
    state = build_state(Settings(data_dir=old, embedder=str(tiny_embedder_dir)))  # its queue never starts
    snapshot = submit_snapshot(state=state, collection="c")
    restore = submit_restore(state=state, collection="c", snapshot=taken, into="copy")
    time.sleep(0.2)
    assert {state.jobs.get(j.id).status for j in (snapshot, restore)} == {"queued"}
    shutil.move(old, new)
    with running_app(new, embedder=str(tiny_embedder_dir)) as (client, _):  # start-up runs the queued jobs
        made = wait_job(client, snapshot.id)
        assert made["status"] == "succeeded", made
        listed = [s["name"] for s in client.get("/collections/c/snapshots").json()["snapshots"]]
        assert made["result"]["snapshot"] in listed
        assert wait_job(client, restore.id)["status"] == "succeeded"
        r = client.post("/search", json={"collection": "copy", "query": "tides", "mode": "bm25"})
        assert [h["id"] for h in r.json()["hits"]] == ["d"]
    assert not old.exists()  # nothing written at the old path
