"""Taking snapshots through the job runner: what the tar holds (and no server path), how a snapshot is found (only
by listing), which manifests a server reads, and a snapshot job run again after a crash makes one snapshot and
sweeps what jobs that are over left. Restoring one: test_snapshot_restore.py."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

import indexing.snapshots as snapshots
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus
from indexing.snapshot_format import SnapshotNotFound, find_snapshot, list_snapshots, read_manifest
from tests.indexing.snapshot_helpers import DOCS, Killed, kill_once, make_collection, make_env, take_snapshot
from tests.snapshot_corpus import SCHEMA


@pytest.fixture
def env(tmp_path: Path, tiny_embedder_dir: Path) -> dict[str, Any]:
    return make_env(tmp_path, tiny_embedder_dir)


def test_the_tar_holds_a_manifest_and_the_doc_stores_and_no_server_path(env: dict[str, Any]) -> None:
    make_collection(env, "c", shards=2)
    name = take_snapshot(env, "c")
    path, info = find_snapshot(env["dir"] / "snapshots", "c", name)
    assert path.name == name and name.startswith("c-") and path.parent.name == "c"
    manifest = read_manifest(path)
    assert manifest["format"] == 1 and manifest["documents"] == len(DOCS) == info.documents
    assert manifest["embedder"]["name"] == "unregistered" and manifest["embedder"]["dims"] == 32
    assert manifest["schema"] == SCHEMA and manifest["shards"] == 2
    with tarfile.open(path) as tar:
        names = tar.getnames()
        body = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.name.endswith(".json"))  # type: ignore[union-attr]
    assert names[:2] == ["snapshot.json", "collection.json"]
    assert set(names[2:]) == {f"shards/s00{i}/{f}" for i in range(2) for f in ("collection.json", "docs.sqlite3")}
    assert env["model"].encode() not in body  # the model is named, its folder is not shown
    assert [i.name for i in list_snapshots(env["dir"] / "snapshots", "c")] == [name]


def test_names_are_found_only_by_listing(env: dict[str, Any]) -> None:
    make_collection(env, "c")
    name = take_snapshot(env, "c")
    root = env["dir"] / "snapshots"
    (env["dir"] / "c-20200101T000000-abcdef.tar").write_bytes(b"outside the folder")
    for bad in ("../c-20200101T000000-abcdef.tar", f"../c/{name}", name.upper(), name + "x", "c", "", "../../jobs"):
        with pytest.raises(SnapshotNotFound):
            find_snapshot(root, "c", bad)
    with pytest.raises(SnapshotNotFound):
        find_snapshot(root, "..", name)
    assert list_snapshots(root, "..") == [] and list_snapshots(root, "nothing") == []


def test_a_manifest_of_another_format_is_refused(env: dict[str, Any], tmp_path: Path) -> None:
    make_collection(env, "c")
    name = take_snapshot(env, "c")
    path, _ = find_snapshot(env["dir"] / "snapshots", "c", name)
    with tarfile.open(path) as tar:
        manifest = json.loads(tar.extractfile("snapshot.json").read())  # type: ignore[union-attr]
    from indexing.snapshot_format import SnapshotInvalid, check_manifest

    with pytest.raises(SnapshotInvalid, match="format 2 is not one this server reads"):
        check_manifest({**manifest, "format": 2})
    with pytest.raises(SnapshotInvalid, match="cannot hold"):
        check_manifest({**manifest, "files": {**manifest["files"], "../../etc/passwd": {"sha256": "0"}}})
    with pytest.raises(SnapshotInvalid, match="not a whole collection"):
        check_manifest({**manifest, "shards": 2})
    for bad in ("context/..", "context/.", "context/" + "x" * 101):  # never a folder, never too long to open
        with pytest.raises(SnapshotInvalid, match="cannot hold"):
            check_manifest({**manifest, "files": {**manifest["files"], bad: {"sha256": "0"}}})
    for count in ("lots", -1, True):
        with pytest.raises(SnapshotInvalid, match="document count"):
            check_manifest({**manifest, "documents": count})
    for size in (None, -1, "12", True):  # a member's size bounds what its extraction may write
        entry = {"sha256": "0"} if size is None else {"sha256": "0", "bytes": size}
        with pytest.raises(SnapshotInvalid, match="no size"):
            check_manifest({**manifest, "files": {**manifest["files"], "context/ctx.v1-a.npy": entry}})
    listed = {"sha256": "0", "bytes": 12}
    assert check_manifest({**manifest, "files": {**manifest["files"], "context/ctx.v1-a.npy": listed}})


@pytest.mark.parametrize("at", ["write_info", "fsync_dir"], ids=["before-rename", "after-rename"])
def test_a_snapshot_job_run_again_after_a_crash_makes_one_snapshot(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, at: str
) -> None:
    make_collection(env, "c")
    kill_once(monkeypatch, snapshots, at)
    spec = {"collection": "c", "dir": str(env["dir"] / "snapshots"), "embedder": env["model"], "embedder_name": "x"}
    job = env["jobs"].create(collection="c", kind=JobKind.SNAPSHOT, payload=[spec])
    with pytest.raises(Killed):
        run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])
    chosen = env["jobs"].get(job.id).result["snapshot"]  # recorded before anything was written
    assert env["jobs"].get(job.id).status == JobStatus.RUNNING
    status = run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])
    assert status == JobStatus.SUCCEEDED
    done = env["jobs"].get(job.id)
    assert done.result["snapshot"] == chosen and done.attempts == 2
    listed = list_snapshots(env["dir"] / "snapshots", "c")
    assert [i.name for i in listed] == [chosen] and listed[0].sha256 == done.result["sha256"]
    assert sorted(p.name for p in (env["dir"] / "snapshots" / "c").iterdir()) == sorted([chosen, chosen[:-4] + ".json"])


def test_a_snapshot_job_sweeps_what_jobs_that_are_over_left(env: dict[str, Any]) -> None:
    make_collection(env, "c")
    folder = env["dir"] / "snapshots" / "c"
    folder.mkdir(parents=True)
    over = env["jobs"].create(collection="c", kind=JobKind.SNAPSHOT, payload=[{}])
    env["jobs"].finish(over.id, JobStatus.FAILED, "killed")
    running = env["jobs"].create(collection="c", kind=JobKind.SNAPSHOT, payload=[{}])
    for job_id in (over.id, running.id):
        (folder / f".{job_id}.work" / "shards").mkdir(parents=True)
        (folder / f".{job_id}.tar.tmp").write_bytes(b"half a tar")
    orphan = folder / "c-20200101T000000-abcdef.json"  # a delete cut short: the record without its tar
    orphan.write_text(json.dumps({"name": orphan.name[:-5] + ".tar", "job": over.id}))
    take_snapshot(env, "c")
    left = sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p == orphan)
    assert left == sorted([f".{running.id}.tar.tmp", f".{running.id}.work"])
