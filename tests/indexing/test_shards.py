"""Sharded collections: hash routing, one doc store per shard, numbered passages, crash-safe two-phase commit."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStore
from indexing.shard_writer import ShardWriter
from indexing.shards import POINTER, ShardedCollection, shard_of
from indexing.store import CollectionStore
from models import EmbedderCache

DOCS = [
    {"id": f"d{i}", "title": f"t{i % 5}", "text": f"document {i} about topic {i % 7} and more words"} for i in range(40)
]


def _ingest(
    store: CollectionStore, jobs: JobStore, name: str, docs: list[dict], kind: JobKind = JobKind.UPSERT
) -> None:
    job = jobs.create(collection=name, kind=kind, payload=docs)
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache()) == "succeeded"


@pytest.fixture
def pair(tmp_path: Path, tiny_embedder_dir: Path) -> tuple[CollectionStore, JobStore, CollectionSettings]:
    store, jobs = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3")
    dim = EmbedderCache().get(tiny_embedder_dir).dim
    return store, jobs, CollectionSettings(name="one", embedder=str(tiny_embedder_dir), dim=dim)


def test_shard_of_is_stable_and_spreads() -> None:
    assert shard_of("doc-1", 3) == shard_of("doc-1", 3)  # blake2b: the same in every process
    counts = [0, 0, 0]
    for i in range(3000):
        counts[shard_of(f"doc-{i}", 3)] += 1
    assert min(counts) > 900


@pytest.mark.parametrize("shards", [0, -1, 257])
def test_shards_out_of_range_are_refused(shards: int) -> None:
    with pytest.raises(ValueError, match="shards must be between 1 and 256"):
        CollectionSettings(name="x", embedder="e", dim=8, shards=shards)


def test_settings_without_shards_read_as_one() -> None:
    d = CollectionSettings(name="x", embedder="e", dim=8).to_json()
    del d["shards"]
    assert CollectionSettings.from_json(d).shards == 1


def test_sharded_ingest_routes_by_hash_and_numbers_passages_like_one_store(pair) -> None:  # type: ignore[no-untyped-def]
    store, jobs, settings = pair
    one = store.create(settings)
    three = store.create(replace(settings, name="three", shards=3))
    assert isinstance(three, ShardedCollection) and len(three.shards) == 3
    for name in ("one", "three"):
        _ingest(store, jobs, name, DOCS)
    for i, shard in enumerate(three.shards):
        ids = shard.docstore.document_ids()
        assert ids and all(shard_of(d, 3) == i for d in ids)
    single = {p for pids, _, _ in one.docstore.iter_passages() for p in pids.tolist()}
    pids = {p for s in three.shards for ps, _, _ in s.docstore.iter_passages() for p in ps.tolist()}
    assert pids == single  # the same passage ids, unique across shards
    stats = three.stats()
    assert (stats["documents"], stats["passages"], stats["shards"]) == (40, len(single), 3)
    assert stats["index"]["passages"] == len(single)
    # Re-ingesting unchanged documents writes nothing; deletes go to the right shard.
    seqs = [s.docstore.seq() for s in three.shards]
    _ingest(store, jobs, "three", DOCS)
    assert [s.docstore.seq() for s in three.shards] == seqs
    _ingest(store, jobs, "three", ["d3", "d4"], JobKind.DELETE)
    assert three.stats()["documents"] == 38


def test_document_numbers_are_looked_up_in_the_shard_of_each_id_alone(pair, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    store, jobs, settings = pair
    three = store.create(replace(settings, name="three", shards=3))
    _ingest(store, jobs, "three", DOCS)
    assert isinstance(three, ShardedCollection)
    asked: list[list[str]] = []
    for shard in three.shards:
        real = shard.docstore.doc_numbers
        monkeypatch.setattr(shard.docstore, "doc_numbers", lambda ids, real=real: asked.append(list(ids)) or real(ids))
    wanted = [d for d in ("d1", "d2", "d5", "absent") if shard_of(d, 3) != shard_of("d7", 3)][:2]
    numbers = three.doc_numbers(wanted)
    assert [set(n) for n in numbers] == [{d for d in wanted if shard_of(d, 3) == i} for i in range(3)]
    assert len(asked) == len({shard_of(d, 3) for d in wanted}) and all(asked)  # the other shards were not asked
    assert sorted(d for ids in asked for d in ids) == sorted(wanted)


def test_a_failed_commit_leaves_the_published_set_in_force(pair, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    store, jobs, settings = pair
    three = store.create(replace(settings, name="three", shards=3))
    _ingest(store, jobs, "three", DOCS[:20])
    assert isinstance(three, ShardedCollection)
    before = three.pointer()
    real = ShardWriter.commit
    calls = []

    def crash_on_second(self: ShardWriter, *args: object, **kw: object) -> int:
        calls.append(self.dir)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ShardWriter, "commit", crash_on_second)
    job = jobs.create(collection="three", kind=JobKind.UPSERT, payload=DOCS[20:])
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache()) == "failed"
    assert three.pointer() == before  # searches keep reading the previous, consistent set
    monkeypatch.setattr(ShardWriter, "commit", real)
    # The doc stores moved on: at start-up the shards behind catch up with a commit of what they lack.
    assert three.check_consistency().startswith("committed")
    assert three.pointer()["generation"] == before["generation"] + 1
    assert three.check_consistency() == "ok"


def test_reopened_store_sees_the_sharded_collection(pair) -> None:  # type: ignore[no-untyped-def]
    store, jobs, settings = pair
    store.create(replace(settings, name="three", shards=3))
    _ingest(store, jobs, "three", DOCS[:10])
    again = CollectionStore(store.root.parent).get("three")
    assert isinstance(again, ShardedCollection) and again.stats()["documents"] == 10
    assert json.loads((again.segments_dir / POINTER).read_text())["versions"]
    assert sorted(store.names()) == ["three"]  # shard directories are not collections of their own
