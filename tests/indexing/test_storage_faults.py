"""A full disk and I/O errors while ingesting: the job fails with a clear error, the last published state keeps
serving, and the same job succeeds once the fault is gone (POST /jobs/{id}/retry, here JobStore.requeue).

The disk is real: a small tmpfs mounted for the test (it needs root, as CI runs; skipped otherwise), filled
with a ballast file at three moments: before the doc store write (SQLite), before a commit's segment write,
and before the manifest is published. I/O errors (EIO) are injected by a wrapper around FAISS's index write,
which needs no root."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import faiss
import pytest

import indexing.manifest as manifest_mod
import indexing.segment as segment_mod
from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.shard_writer import ShardWriter
from indexing.store import CollectionStore
from models import EmbedderCache
from service.search import search_batch

DOCS = [{"id": f"d{i}", "text": f"stored document {i} about tides and the moon number{i}"} for i in range(30)]
MORE = [{"id": f"n{i}", "text": f"new document {i} about volcanoes and magma fresh{i}"} for i in range(30)]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


class Ballast:
    """Fills a filesystem to the last byte, and frees it again."""

    def __init__(self, root: Path) -> None:
        self.path = root / f"ballast-{uuid.uuid4().hex}"

    def fill(self) -> None:
        for size in (1 << 16, 4096, 512, 1):  # down to the last byte, so the next write of any size fails
            try:
                with open(self.path, "ab", buffering=0) as f:
                    while True:
                        f.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC

    def free(self) -> None:
        self.path.unlink(missing_ok=True)


def _setup(data: Path, embedder_dir: Path) -> tuple[CollectionStore, JobStore]:
    # The job records live off the small disk: what fails is the collection's own writes.
    store, jobs = CollectionStore(data), JobStore(data.parent.parent / "jobs.sqlite3")
    dim = EmbedderCache().get(embedder_dir).dim
    store.create(CollectionSettings(name="c", embedder=str(embedder_dir), dim=dim))
    job = jobs.create(collection="c", kind=JobKind.UPSERT, payload=DOCS)
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache()) == JobStatus.SUCCEEDED
    return store, jobs


def _hits(data: Path, embedder_dir: Path, query: str) -> list[tuple[str, float]]:
    coll = CollectionStore(data).get("c")  # as a process starting now would see it
    res = search_batch(collection=coll, embedder=EmbedderCache().get(embedder_dir), queries=[query], k=5, mode="bm25")
    return [(h.id, h.score) for h in res[0].hits]


def _fail_then_retry(data: Path, embedder_dir: Path, arm: Callable[[], None], disarm: Callable[[], None]) -> str:
    store, jobs = _setup(data, embedder_dir)
    before = _hits(data, embedder_dir, "volcanoes magma fresh3")
    job = jobs.create(collection="c", kind=JobKind.UPSERT, payload=MORE)
    arm()
    try:
        status = run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache())
    finally:
        disarm()
    failed = jobs.get(job.id)
    assert status == JobStatus.FAILED and failed.error, failed
    assert _hits(data, embedder_dir, "volcanoes magma fresh3") == before  # the published state still serves
    jobs.requeue(job.id)
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache()) == JobStatus.SUCCEEDED
    assert _hits(data, embedder_dir, "volcanoes magma fresh3")[0][0] == "n3"
    coll = CollectionStore(data).get("c")
    assert coll.docstore.counts()[0] == len(DOCS) + len(MORE)
    assert not [p for p in coll.segments_dir.iterdir() if p.name.startswith(("tmp-", "merging-", "."))]
    return str(failed.error)


def test_full_disk_at_the_sqlite_write(small_disk: Path, tiny_embedder_dir: Path) -> None:
    ballast = Ballast(small_disk)
    error = _fail_then_retry(small_disk / "data", tiny_embedder_dir, ballast.fill, ballast.free)
    assert "full" in error.lower()  # sqlite3: "database or disk is full"


@pytest.mark.parametrize("where", ["segment", "manifest"])
def test_full_disk_during_a_commit(
    small_disk: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    ballast = Ballast(small_disk)
    target: Any = ShardWriter if where == "segment" else manifest_mod
    name = "_new_segment" if where == "segment" else "publish"
    real = getattr(target, name)

    def full_then_real(*args: Any, **kw: Any) -> Any:
        ballast.fill()  # the doc store write went through; the disk fills just before this step
        return real(*args, **kw)

    def arm() -> None:
        monkeypatch.setattr(target, name, full_then_real)
        if where == "manifest":
            monkeypatch.setattr("indexing.shard_writer.publish", full_then_real)

    def disarm() -> None:
        monkeypatch.undo()
        ballast.free()

    error = _fail_then_retry(small_disk / "data", tiny_embedder_dir, arm, disarm)
    assert "No space left on device" in error


def test_io_error_writing_a_segment(tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = faiss.write_index

    def eio(*args: Any, **kw: Any) -> None:
        raise OSError(errno.EIO, "Input/output error (injected)")

    error = _fail_then_retry(
        tmp_path / "data",
        tiny_embedder_dir,
        lambda: monkeypatch.setattr(segment_mod.faiss, "write_index", eio),
        lambda: monkeypatch.setattr(segment_mod.faiss, "write_index", real),
    )
    assert "Input/output error" in error
