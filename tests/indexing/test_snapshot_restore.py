"""Restoring snapshots through the job runner: a restore into a new name searches, counts and filters as the source
did when it was snapshotted (sharded and contextual too), a damaged tar, the same name or another model is refused
and leaves no collection, and a restore killed midway is cleaned up or made once. Taking them: test_snapshots.py."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import pytest
from transformers import BertModel

from indexing import snapshot_restore
from indexing.collection import CollectionSettings
from indexing.engine import LOCAL_FANOUT, count
from indexing.engine import search as engine_search
from indexing.filter_parser import parse_filter
from indexing.filters import Schema
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus
from indexing.ranking import RankRequest
from indexing.shard_budget import ShardCap
from indexing.snapshot_format import find_snapshot
from indexing.snapshot_restore import clean_restore_leftovers
from models import EmbedderConfig
from tests.indexing.snapshot_helpers import (
    DOCS,
    QUERIES,
    Killed,
    kill_once,
    make_collection,
    make_env,
    restore_snapshot,
    run_one_job,
    take_snapshot,
)
from tests.snapshot_corpus import SCHEMA, YEAR_FILTER
from tests.tiny_models import minilm_tokenizer, tiny_bert_config


@pytest.fixture
def env(tmp_path: Path, tiny_embedder_dir: Path) -> dict[str, Any]:
    return make_env(tmp_path, tiny_embedder_dir)


def _results(env: dict[str, Any], name: str) -> dict[str, Any]:
    """Every query's hits in each mode (unit, score, passage), the count under a filter, and every document."""
    coll = env["store"].get(name)
    model = env["embedders"].get(env["model"])
    qv = model.encode_queries(QUERIES)
    out: dict[str, Any] = {}
    for mode in ("dense", "bm25", "hybrid"):
        found = engine_search(coll, LOCAL_FANOUT, qv, QUERIES, RankRequest(mode=mode, k=5))  # type: ignore[arg-type]
        out[mode] = [f.top for f in found]
    node = parse_filter(YEAR_FILTER, Schema.from_json(coll.settings.schema))
    out["count"] = (count(coll, LOCAL_FANOUT, None), count(coll, LOCAL_FANOUT, node))
    ids = [doc_id for doc_id, _ in coll.scan_metadata(None, 100)]
    docs = coll.documents(ids)
    out["documents"] = {i: (d.title, d.text, d.metadata, d.content_hash) for i, d in docs.items()}
    out["schema"] = coll.settings.schema
    return out


def _later_writes(env: dict[str, Any], name: str) -> None:
    new = [{"id": "n1", "text": "tides study after the snapshot", "metadata": {"topic": "tides", "year": 2030}}]
    assert run_one_job(env, name, JobKind.UPSERT, new) == JobStatus.SUCCEEDED
    assert run_one_job(env, name, JobKind.DELETE, ["d3", "d4"]) == JobStatus.SUCCEEDED
    patch = [{"id": "d5", "metadata": {"topic": "volcano", "year": 1990}, "mode": "replace"}]
    assert run_one_job(env, name, JobKind.PATCH, patch) == JobStatus.SUCCEEDED


@pytest.mark.parametrize("shards", [1, 3], ids=["one-shard", "three-shards"])
def test_a_restore_is_the_collection_as_it_was_snapshotted(env: dict[str, Any], shards: int) -> None:
    make_collection(env, "c", shards)
    before = _results(env, "c")
    name = take_snapshot(env, "c")
    job = env["jobs"].get(env["last"])
    assert job.done == job.total == len(DOCS)
    _later_writes(env, "c")
    assert _results(env, "c") != before  # the source moved on

    assert restore_snapshot(env, "c", name, "copy") == JobStatus.SUCCEEDED, env["jobs"].get(env["last"]).error
    after = _results(env, "copy")
    for mode in ("dense", "bm25", "hybrid"):
        for got, want in zip(after[mode], before[mode], strict=True):
            assert [(u, p) for u, _, p in got] == [(u, p) for u, _, p in want], mode
            assert [s for _, s, _ in got] == pytest.approx([s for _, s, _ in want], abs=1e-9), mode
    assert after["count"] == before["count"] and after["documents"] == before["documents"]
    assert after["schema"] == SCHEMA
    copy = env["store"].get("copy")
    assert copy.settings.shards == shards and copy.settings.embedder == env["model"]
    assert [s.name for s in copy.shard_list] == (["copy"] if shards == 1 else [f"copy.s{i:03d}" for i in range(3)])
    # The restored collection takes writes of its own, and the source is untouched by it.
    assert run_one_job(env, "copy", JobKind.DELETE, ["d0"]) == JobStatus.SUCCEEDED
    assert env["store"].get("c").document("d0") is not None
    assert not [p.name for p in (env["dir"] / "collections").iterdir() if p.name.startswith(".")]


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["doc store", "manifest", "padding"])
def test_a_damaged_snapshot_is_refused_and_leaves_no_collection(env: dict[str, Any], where: str) -> None:
    make_collection(env, "c")
    name = take_snapshot(env, "c")
    path, _ = find_snapshot(env["dir"] / "snapshots", "c", name)
    with tarfile.open(path) as tar:
        member = tar.getmember("docs.sqlite3" if where == "doc store" else "snapshot.json")
    offset = {"doc store": member.offset_data + member.size // 2, "manifest": member.offset_data + 20}
    _flip(path, offset.get(where, path.stat().st_size - 10))
    assert restore_snapshot(env, "c", name, "copy") == JobStatus.FAILED
    error = env["jobs"].get(env["last"]).error or ""
    assert "damaged" in error and str(env["dir"]) not in error, error
    assert not env["store"].exists("copy") and env["store"].names() == ["c"]
    assert [p.name for p in (env["dir"] / "collections").iterdir()] == ["c"]


def _retar(path: Path, work: Path, change: str) -> None:
    """The snapshot at `path` rewritten by GNU tar, snapshot.json first: its doc store made a sparse file of 64 MB
    (a few KB in the tar) that snapshot.json lists at that size, or its listed size made one byte more."""
    import json
    import subprocess

    with tarfile.open(path) as tar:
        names = tar.getnames()
        tar.extractall(work, filter="data")
    manifest = json.loads((work / "snapshot.json").read_text())
    if change == "sparse":
        with open(work / "docs.sqlite3", "r+b") as f:
            f.truncate(64 << 20)
        manifest["files"]["docs.sqlite3"]["bytes"] = 64 << 20
    else:
        manifest["files"]["docs.sqlite3"]["bytes"] += 1
    (work / "snapshot.json").write_text(json.dumps(manifest))
    subprocess.run(["tar", "--format=gnu", "--sparse", "-cf", str(path), "-C", str(work), *names], check=True)


@pytest.mark.parametrize("change", ["sparse", "size"])
def test_a_member_is_extracted_only_at_the_size_it_has_in_the_tar(
    env: dict[str, Any], tmp_path: Path, change: str
) -> None:
    """A sparse member would write (and hash) its declared size from a few bytes of tar: a small upload could fill
    the disk. It is refused before a byte of it is written, as is a member whose size is not the listed one."""
    make_collection(env, "c")
    name = take_snapshot(env, "c")
    path, _ = find_snapshot(env["dir"] / "snapshots", "c", name)
    _retar(path, tmp_path / "work", change)
    if change == "sparse":
        with tarfile.open(path) as tar:
            assert tar.getmember("docs.sqlite3").issparse() and path.stat().st_size < 1 << 20
    assert restore_snapshot(env, "c", name, "copy") == JobStatus.FAILED
    error = env["jobs"].get(env["last"]).error or ""
    assert ("not as a plain file" if change == "sparse" else "bytes, not the") in error, error
    assert not env["store"].exists("copy") and [p.name for p in (env["dir"] / "collections").iterdir()] == ["c"]


@pytest.mark.parametrize("when", ["extracting", "rebuilding the index"])
def test_a_cancel_stops_a_restore_before_it_ends(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """A cancel used to be read once, after the whole tar was extracted, and a restore asked to stop went on to
    succeed. It is read every few MB of the tar, and again once the index is rebuilt, before anything shows."""
    make_collection(env, "c")
    name = take_snapshot(env, "c")
    jobs = env["jobs"]

    def cancel_the_restore() -> None:
        jobs.request_cancel(env["last"])

    if when == "extracting":
        monkeypatch.setattr(snapshot_restore, "HEARTBEAT_BYTES", 1)  # a heartbeat at every read
        real_read = snapshot_restore._Hashing.read

        reads: list[int] = []

        def read(self: Any, size: int = -1) -> bytes:
            reads.append(size)
            cancel_the_restore()
            return real_read(self, size)

        monkeypatch.setattr(snapshot_restore._Hashing, "read", read)
    else:
        real_commit = snapshot_restore.commit_collection
        monkeypatch.setattr(
            snapshot_restore, "commit_collection", lambda *a, **k: (real_commit(*a, **k), cancel_the_restore())
        )
    path, info = find_snapshot(env["dir"] / "snapshots", "c", name)
    job = jobs.create(
        collection="copy",
        kind=JobKind.RESTORE,
        payload=[{"snapshot": str(path), "sha256": info.sha256, "into": "copy", "embedder": env["model"]}],
    )
    env["last"] = job.id
    jobs.start(job.id)
    status = run_job(job_id=job.id, jobs=jobs, collections=env["store"], embedders=env["embedders"])
    assert status == JobStatus.CANCELLED, jobs.get(job.id).error
    if when == "extracting":
        assert len(reads) == 1  # stopped at the first heartbeat after the cancel, not at the end of the tar
    assert not env["store"].exists("copy") and [p.name for p in (env["dir"] / "collections").iterdir()] == ["c"]


def test_a_restore_needs_a_new_name_and_the_same_model(env: dict[str, Any], tmp_path: Path) -> None:
    make_collection(env, "c")
    name = take_snapshot(env, "c")
    assert restore_snapshot(env, "c", name, "c") == JobStatus.FAILED
    assert "restore into a new name" in (env["jobs"].get(env["last"]).error or "")
    wide = tmp_path / "wide"  # a 48-dim model: not the snapshot's
    tok = minilm_tokenizer()
    BertModel(tiny_bert_config(vocab_size=tok.vocab_size, hidden_size=48)).save_pretrained(wide)
    tok.save_pretrained(wide)
    EmbedderConfig(pooling="mean", max_length=64).save(wide)
    assert restore_snapshot(env, "c", name, "copy", embedder=str(wide)) == JobStatus.FAILED
    assert "not the same model" in (env["jobs"].get(env["last"]).error or "")
    assert env["store"].names() == ["c"]


def test_a_restore_past_the_shard_cap_when_it_ends_fails_and_leaves_nothing(env: dict[str, Any]) -> None:
    # The API checks the cap when the restore is asked for; other collections may have come since, so the job
    # checks again as it puts the collection into place (under the lock that new collections take).
    make_collection(env, "c", 3)
    name = take_snapshot(env, "c")
    env["store"].shard_cap = ShardCap(5, "test")  # c holds 3: a 3-shard copy would make 6
    assert restore_snapshot(env, "c", name, "copy") == JobStatus.FAILED
    assert "the limit is 5 shards (test)" in (env["jobs"].get(env["last"]).error or "")
    assert env["store"].names() == ["c"]
    assert not [p.name for p in (env["dir"] / "collections").iterdir() if p.name.startswith(".")]
    env["store"].shard_cap = ShardCap(6, "test")
    assert restore_snapshot(env, "c", name, "copy") == JobStatus.SUCCEEDED
    assert env["store"].names() == ["c", "copy"]


def test_start_up_removes_what_a_killed_restore_left(env: dict[str, Any]) -> None:
    make_collection(env, "c")
    name = take_snapshot(env, "c")
    job = env["jobs"].create(collection="copy", kind=JobKind.RESTORE, payload=[{}])
    env["jobs"].finish(job.id, JobStatus.FAILED, "killed")
    (env["dir"] / "collections" / f".restore-{job.id}" / "shards").mkdir(parents=True)
    alive = env["jobs"].create(collection="copy", kind=JobKind.RESTORE, payload=[{}])
    (env["dir"] / "collections" / f".restore-{alive.id}").mkdir()
    assert clean_restore_leftovers(env["store"], env["jobs"]) == [f".restore-{job.id}"]
    assert env["store"].names() == ["c"] and name


def test_a_contextual_collection_keeps_its_corpus_context(env: dict[str, Any], tiny_cde_dir: Path) -> None:
    """A CDE collection's vectors were made with its corpus context: the snapshot carries it, and the restored
    collection encodes queries with the same one (identical dense hits and scores)."""
    env["model"] = str(tiny_cde_dir)
    env["store"].create(CollectionSettings(name="c", embedder=env["model"], dim=32))
    assert run_one_job(env, "c", JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    model = env["embedders"].get(env["model"])

    def dense(name: str) -> list[Any]:
        coll = env["store"].get(name)
        qv = model.encode_queries(QUERIES, context=coll.query_context(LOCAL_FANOUT))
        return [f.top for f in engine_search(coll, LOCAL_FANOUT, qv, QUERIES, RankRequest(mode="dense", k=5))]

    before = dense("c")
    name = take_snapshot(env, "c")
    assert restore_snapshot(env, "c", name, "copy") == JobStatus.SUCCEEDED, env["jobs"].get(env["last"]).error
    ctx = env["store"].get("copy").query_context(LOCAL_FANOUT)
    assert ctx is not None and ctx.id == env["store"].get("c").query_context(LOCAL_FANOUT).id
    after = dense("copy")
    assert [[(u, p) for u, _, p in t] for t in after] == [[(u, p) for u, _, p in t] for t in before]
    assert [s for t in after for _, s, _ in t] == pytest.approx([s for t in before for _, s, _ in t], abs=1e-9)


@pytest.mark.parametrize("at", ["fsync_tree", "fsync_dir"], ids=["before-rename", "after-rename"])
def test_a_restore_run_again_after_a_crash_makes_the_collection_once(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, at: str
) -> None:
    import indexing.snapshot_restore as restore

    make_collection(env, "c")
    name = take_snapshot(env, "c")
    kill_once(monkeypatch, restore, at)
    with pytest.raises(Killed):
        restore_snapshot(env, "c", name, "copy")
    job_id = env["last"]
    assert env["jobs"].get(job_id).status == JobStatus.RUNNING
    assert env["store"].exists("copy") == (at == "fsync_dir")  # whole, or not there at all
    status = run_job(job_id=job_id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])
    assert status == JobStatus.SUCCEEDED, env["jobs"].get(job_id).error
    assert env["store"].names() == ["c", "copy"] and env["store"].get("copy").docstore.counts()[0] == len(DOCS)
    assert sorted(p.name for p in (env["dir"] / "collections").iterdir()) == ["c", "copy"]
