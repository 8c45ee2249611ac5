"""Snapshots through the job runner: a snapshot holds the collection as it was (later writes are not in it), a
restore into a new name searches, counts and filters as the source did then (sharded too), a damaged or foreign
tar is refused and leaves no collection, and a snapshot job run again after a crash makes one snapshot."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from transformers import BertModel

import indexing.snapshots as snapshots
from indexing.collection import CollectionSettings
from indexing.engine import LOCAL_FANOUT, count
from indexing.engine import search as engine_search
from indexing.filters import Schema, parse_filter
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.ranking import RankRequest
from indexing.snapshot_format import SnapshotNotFound, find_snapshot, list_snapshots, read_manifest
from indexing.snapshot_restore import clean_restore_leftovers
from indexing.store import CollectionStore
from models import EmbedderCache, EmbedderConfig
from tests.snapshot_corpus import SCHEMA, YEAR_FILTER, documents
from tests.tiny_models import minilm_tokenizer, tiny_bert_config

DOCS = documents(30)
QUERIES = ["tides study", "volcano notes", "insulin number 7", "graphene"]


class Killed(BaseException):
    """Stands for a kill: nothing the job runner catches."""


@pytest.fixture
def env(tmp_path: Path, tiny_embedder_dir: Path) -> dict[str, Any]:
    store = CollectionStore(tmp_path)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    embedders = EmbedderCache()
    return {"store": store, "jobs": jobs, "embedders": embedders, "model": str(tiny_embedder_dir), "dir": tmp_path}


def _make(env: dict[str, Any], name: str, shards: int = 1) -> None:
    dim = env["embedders"].get(env["model"]).dim
    env["store"].create(CollectionSettings(name=name, embedder=env["model"], dim=dim, shards=shards))
    assert _job(env, name, JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    assert _job(env, name, JobKind.SCHEMA, [SCHEMA]) == JobStatus.SUCCEEDED


def _job(env: dict[str, Any], collection: str, kind: JobKind, payload: list[Any]) -> JobStatus:
    job = env["jobs"].create(collection=collection, kind=kind, payload=payload)
    env["last"] = job.id
    return run_job(job_id=job.id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])


def _snapshot(env: dict[str, Any], collection: str) -> str:
    spec = {"collection": collection, "dir": str(env["dir"] / "snapshots"), "embedder": env["model"]}
    status = _job(env, collection, JobKind.SNAPSHOT, [{**spec, "embedder_name": "unregistered"}])
    job = env["jobs"].get(env["last"])
    assert status == JobStatus.SUCCEEDED, job.error
    return str(job.result["snapshot"])


def _restore(env: dict[str, Any], collection: str, name: str, into: str, **spec: Any) -> JobStatus:
    path, info = find_snapshot(env["dir"] / "snapshots", collection, name)
    payload = {"snapshot": str(path), "sha256": info.sha256, "into": into, "embedder": env["model"], **spec}
    return _job(env, into, JobKind.RESTORE, [payload])


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
    assert _job(env, name, JobKind.UPSERT, new) == JobStatus.SUCCEEDED
    assert _job(env, name, JobKind.DELETE, ["d3", "d4"]) == JobStatus.SUCCEEDED
    patch = [{"id": "d5", "metadata": {"topic": "volcano", "year": 1990}, "mode": "replace"}]
    assert _job(env, name, JobKind.PATCH, patch) == JobStatus.SUCCEEDED


@pytest.mark.parametrize("shards", [1, 3], ids=["one-shard", "three-shards"])
def test_a_restore_is_the_collection_as_it_was_snapshotted(env: dict[str, Any], shards: int) -> None:
    _make(env, "c", shards)
    before = _results(env, "c")
    name = _snapshot(env, "c")
    job = env["jobs"].get(env["last"])
    assert job.done == job.total == len(DOCS)
    _later_writes(env, "c")
    assert _results(env, "c") != before  # the source moved on

    assert _restore(env, "c", name, "copy") == JobStatus.SUCCEEDED, env["jobs"].get(env["last"]).error
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
    assert _job(env, "copy", JobKind.DELETE, ["d0"]) == JobStatus.SUCCEEDED
    assert env["store"].get("c").document("d0") is not None
    assert not [p.name for p in (env["dir"] / "collections").iterdir() if p.name.startswith(".")]


def test_the_tar_holds_a_manifest_and_the_doc_stores_and_no_server_path(env: dict[str, Any]) -> None:
    _make(env, "c", shards=2)
    name = _snapshot(env, "c")
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


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["doc store", "manifest", "padding"])
def test_a_damaged_snapshot_is_refused_and_leaves_no_collection(env: dict[str, Any], where: str) -> None:
    _make(env, "c")
    name = _snapshot(env, "c")
    path, _ = find_snapshot(env["dir"] / "snapshots", "c", name)
    with tarfile.open(path) as tar:
        member = tar.getmember("docs.sqlite3" if where == "doc store" else "snapshot.json")
    offset = {"doc store": member.offset_data + member.size // 2, "manifest": member.offset_data + 20}
    _flip(path, offset.get(where, path.stat().st_size - 10))
    assert _restore(env, "c", name, "copy") == JobStatus.FAILED
    error = env["jobs"].get(env["last"]).error or ""
    assert "damaged" in error and str(env["dir"]) not in error, error
    assert not env["store"].exists("copy") and env["store"].names() == ["c"]
    assert [p.name for p in (env["dir"] / "collections").iterdir()] == ["c"]


def test_a_restore_needs_a_new_name_and_the_same_model(env: dict[str, Any], tmp_path: Path) -> None:
    _make(env, "c")
    name = _snapshot(env, "c")
    assert _restore(env, "c", name, "c") == JobStatus.FAILED
    assert "restore into a new name" in (env["jobs"].get(env["last"]).error or "")
    wide = tmp_path / "wide"  # a 48-dim model: not the snapshot's
    tok = minilm_tokenizer()
    BertModel(tiny_bert_config(vocab_size=tok.vocab_size, hidden_size=48)).save_pretrained(wide)
    tok.save_pretrained(wide)
    EmbedderConfig(pooling="mean", max_length=64).save(wide)
    assert _restore(env, "c", name, "copy", embedder=str(wide)) == JobStatus.FAILED
    assert "not the same model" in (env["jobs"].get(env["last"]).error or "")
    assert env["store"].names() == ["c"]


def test_names_are_found_only_by_listing(env: dict[str, Any]) -> None:
    _make(env, "c")
    name = _snapshot(env, "c")
    root = env["dir"] / "snapshots"
    (env["dir"] / "c-20200101T000000-abcdef.tar").write_bytes(b"outside the folder")
    for bad in ("../c-20200101T000000-abcdef.tar", f"../c/{name}", name.upper(), name + "x", "c", "", "../../jobs"):
        with pytest.raises(SnapshotNotFound):
            find_snapshot(root, "c", bad)
    with pytest.raises(SnapshotNotFound):
        find_snapshot(root, "..", name)
    assert list_snapshots(root, "..") == [] and list_snapshots(root, "nothing") == []


def _kill_once(monkeypatch: pytest.MonkeyPatch, target: Any, attribute: str) -> None:
    real = getattr(target, attribute)
    calls: list[int] = []

    def dies(*args: Any, **kwargs: Any) -> Any:
        if not calls:
            calls.append(1)
            raise Killed()
        return real(*args, **kwargs)

    monkeypatch.setattr(target, attribute, dies)


@pytest.mark.parametrize("at", ["write_info", "fsync_dir"], ids=["before-rename", "after-rename"])
def test_a_snapshot_job_run_again_after_a_crash_makes_one_snapshot(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, at: str
) -> None:
    _make(env, "c")
    _kill_once(monkeypatch, snapshots, at)
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


def test_start_up_removes_what_a_killed_restore_left(env: dict[str, Any]) -> None:
    _make(env, "c")
    name = _snapshot(env, "c")
    job = env["jobs"].create(collection="copy", kind=JobKind.RESTORE, payload=[{}])
    env["jobs"].finish(job.id, JobStatus.FAILED, "killed")
    (env["dir"] / "collections" / f".restore-{job.id}" / "shards").mkdir(parents=True)
    alive = env["jobs"].create(collection="copy", kind=JobKind.RESTORE, payload=[{}])
    (env["dir"] / "collections" / f".restore-{alive.id}").mkdir()
    assert clean_restore_leftovers(env["store"], env["jobs"]) == [f".restore-{job.id}"]
    assert env["store"].names() == ["c"] and name


def test_a_manifest_of_another_format_is_refused(env: dict[str, Any], tmp_path: Path) -> None:
    _make(env, "c")
    name = _snapshot(env, "c")
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


def test_a_contextual_collection_keeps_its_corpus_context(env: dict[str, Any], tiny_cde_dir: Path) -> None:
    """A CDE collection's vectors were made with its corpus context: the snapshot carries it, and the restored
    collection encodes queries with the same one (identical dense hits and scores)."""
    env["model"] = str(tiny_cde_dir)
    env["store"].create(CollectionSettings(name="c", embedder=env["model"], dim=32))
    assert _job(env, "c", JobKind.UPSERT, DOCS) == JobStatus.SUCCEEDED
    model = env["embedders"].get(env["model"])

    def dense(name: str) -> list[Any]:
        coll = env["store"].get(name)
        qv = model.encode_queries(QUERIES, context=coll.query_context(LOCAL_FANOUT))
        return [f.top for f in engine_search(coll, LOCAL_FANOUT, qv, QUERIES, RankRequest(mode="dense", k=5))]

    before = dense("c")
    name = _snapshot(env, "c")
    assert _restore(env, "c", name, "copy") == JobStatus.SUCCEEDED, env["jobs"].get(env["last"]).error
    ctx = env["store"].get("copy").query_context(LOCAL_FANOUT)
    assert ctx is not None and ctx.id == env["store"].get("c").query_context(LOCAL_FANOUT).id
    after = dense("copy")
    assert [[(u, p) for u, _, p in t] for t in after] == [[(u, p) for u, _, p in t] for t in before]
    assert [s for t in after for _, s, _ in t] == pytest.approx([s for t in before for _, s, _ in t], abs=1e-9)


def test_a_snapshot_job_sweeps_what_jobs_that_are_over_left(env: dict[str, Any]) -> None:
    _make(env, "c")
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
    _snapshot(env, "c")
    left = sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p == orphan)
    assert left == sorted([f".{running.id}.tar.tmp", f".{running.id}.work"])


@pytest.mark.parametrize("at", ["fsync_tree", "fsync_dir"], ids=["before-rename", "after-rename"])
def test_a_restore_run_again_after_a_crash_makes_the_collection_once(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, at: str
) -> None:
    import indexing.snapshot_restore as restore

    _make(env, "c")
    name = _snapshot(env, "c")
    _kill_once(monkeypatch, restore, at)
    with pytest.raises(Killed):
        _restore(env, "c", name, "copy")
    job_id = env["last"]
    assert env["jobs"].get(job_id).status == JobStatus.RUNNING
    assert env["store"].exists("copy") == (at == "fsync_dir")  # whole, or not there at all
    status = run_job(job_id=job_id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])
    assert status == JobStatus.SUCCEEDED, env["jobs"].get(job_id).error
    assert env["store"].names() == ["c", "copy"] and env["store"].get("copy").docstore.counts()[0] == len(DOCS)
    assert sorted(p.name for p in (env["dir"] / "collections").iterdir()) == ["c", "copy"]
