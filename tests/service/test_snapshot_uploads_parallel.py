"""Uploads sent at once, and an upload a crash cut short, through a real server. Each upload's file survives the
others' sweeps of the uploads folder (a sweep removes only files no upload is receiving and no unfinished restore
names), so every upload is accepted and restored, and the folder is empty afterwards; a server started again
removes what a crash left."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from indexing.merger import wait_background
from service.snapshot_uploads import SWEEP_LOCK
from tests.service.conftest import running_app, wait_job
from tests.service.document_helpers import index, run_job

UPLOADS = 12


def test_parallel_uploads_are_all_restored(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    data = tmp_path / "data"
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        index(client, "src", [{"id": f"d{i}", "text": f"note {i} about tides"} for i in range(20)])
        wait_background(60)
        taken = run_job(client, client.post("/collections/src/snapshots"))["result"]
        body = client.get(f"/collections/src/snapshots/{taken['snapshot']}").content
        url = str(client.base_url)

        def upload(i: int) -> httpx.Response:
            with httpx.Client(base_url=url, timeout=120) as c:
                return c.post("/snapshots/upload", params={"into": f"copy-{i}"}, content=body)

        for _round in range(2):  # two rounds: the second's sweeps run while the first's restores may still wait
            with ThreadPoolExecutor(UPLOADS) as pool:
                answers = list(pool.map(upload, range(_round * UPLOADS, (_round + 1) * UPLOADS)))
            assert [r.status_code for r in answers] == [202] * UPLOADS, [
                r.text for r in answers if r.status_code != 202
            ]
            jobs = [wait_job(client, r.json()["job_id"], timeout=120) for r in answers]
            assert [j["status"] for j in jobs] == ["succeeded"] * UPLOADS, [j.get("error") for j in jobs]
        for i in range(2 * UPLOADS):
            assert client.post(f"/collections/copy-{i}/count").json()["count"] == 20
        left = [p.name for p in (data / "snapshots" / ".uploads").iterdir() if p.name != SWEEP_LOCK]
        assert left == []


def test_a_partial_upload_left_by_a_crash_is_removed_at_start_up(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    data = tmp_path / "data"
    uploads = data / "snapshots" / ".uploads"
    uploads.mkdir(parents=True)
    (uploads / "0123abcd.tar").write_bytes(b"half a tar")  # a server was killed while receiving it
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        assert client.get("/readyz").status_code == 200
        assert [p.name for p in uploads.iterdir() if p.name != SWEEP_LOCK] == []


def test_an_upload_takes_the_checksum_in_any_case_and_its_result_names_no_server_file(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    data = tmp_path / "data"
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        index(client, "src", [{"id": f"d{i}", "text": f"note {i}"} for i in range(3)])
        wait_background(60)
        taken = run_job(client, client.post("/collections/src/snapshots"))["result"]
        tar = data / "snapshots" / "src" / taken["snapshot"]
        assert tar.stat().st_mode & 0o777 == 0o600  # it holds every document: the owner's alone
        body = client.get(f"/collections/src/snapshots/{taken['snapshot']}").content
        listed = client.get("/collections/src/snapshots").json()["snapshots"][0]["sha256"]
        r = client.post("/snapshots/upload", params={"into": "copy", "sha256": listed.upper()}, content=body)
        job = run_job(client, r)
        assert job["result"]["collection"] == "copy" and job["result"]["snapshot"] is None
