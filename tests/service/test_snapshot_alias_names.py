"""An alias made with a deleted collection's name does not hide that collection's snapshots: through the name,
the listing shows the alias target's and the deleted collection's, and each can be downloaded and deleted."""

from __future__ import annotations

from pathlib import Path

from indexing.merger import wait_background
from tests.service.conftest import running_app
from tests.service.document_helpers import index, run_job


def test_an_alias_named_like_a_deleted_collection_keeps_its_snapshots_reachable(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    with running_app(tmp_path / "data", embedder=str(tiny_embedder_dir)) as (client, _):
        for name in ("gone", "live"):
            index(client, name, [{"id": f"{name}{i}", "text": f"note {i} about tides"} for i in range(5)])
        wait_background(60)
        old = run_job(client, client.post("/collections/gone/snapshots"))["result"]["snapshot"]
        new = run_job(client, client.post("/collections/live/snapshots"))["result"]["snapshot"]
        assert client.delete("/collections/gone").status_code == 204
        assert client.put("/aliases/gone", json={"collection": "live"}).status_code == 200

        listed = client.get("/collections/gone/snapshots").json()["snapshots"]
        assert sorted((s["name"], s["collection"]) for s in listed) == sorted([(old, "gone"), (new, "live")])
        for snap in (old, new):
            r = client.get(f"/collections/gone/snapshots/{snap}")
            assert r.status_code == 200 and r.content[:1], r.text
        assert client.delete(f"/collections/gone/snapshots/{old}").status_code == 204
        assert [s["name"] for s in client.get("/collections/gone/snapshots").json()["snapshots"]] == [new]
        assert [s["name"] for s in client.get("/collections/live/snapshots").json()["snapshots"]] == [new]


def test_an_empty_folder_a_cancelled_job_left_is_no_collection(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    data = tmp_path / "data"
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        (data / "snapshots" / "ghost").mkdir(parents=True)  # what a snapshot job cancelled by a delete leaves
        r = client.get("/collections/ghost/snapshots")
        assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found", r.text
        index(client, "live", [{"id": "a", "text": "tides"}])
        assert client.get("/collections/live/snapshots").json() == {"snapshots": []}  # a live one lists none yet
