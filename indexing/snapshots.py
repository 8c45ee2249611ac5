"""Snapshot jobs: write a collection to one tar (here), and make a new collection from one (snapshot_restore.py).

A snapshot holds what the collection is, not what is derived from it: the doc store of every shard (documents,
passages and their embeddings, the source of truth), the settings files, and a CDE collection's corpus context.
The segments are not in it: a restore rebuilds them from the doc stores, as start-up does for a collection whose
index is missing, and scores are those of the source because many segments score exactly as one.

The job holds the collection's writer lock (the serving generation's) while it copies the doc stores with SQLite's
online backup API, so no write lands in the middle and every shard is copied at the same point; searches go on.
It packs the copies into a temporary tar outside the lock, records what a listing shows, then renames the tar
into place. The name is chosen once and recorded in the job before anything is written: a job run again after a
crash makes that same one snapshot, never a second.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import shutil
import sqlite3
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from indexing import generations as gens
from indexing.collection import SETTINGS_FILE, Collection
from indexing.context import CONTEXT_DIR
from indexing.jobs import JobKind, JobStatus, JobStore, end_job
from indexing.reindex import job_alive
from indexing.snapshot_format import (
    FORMAT_VERSION,
    MANIFEST,
    UNREGISTERED,
    SnapshotInfo,
    folder_digest,
    new_name,
    read_info,
    write_info,
)
from indexing.snapshot_restore import JobCancelled, restore_snapshot
from indexing.store import CollectionStore
from models import EmbedderCache
from velaio.files import connect_sqlite, from_data_dir, fsync_dir

log = logging.getLogger("vela.snapshots")
BACKUP_PAGES = 1024  # SQLite pages copied per backup step (4 MiB): progress and heartbeats between steps
HEARTBEAT_BYTES = 64 << 20  # while hashing and packing, a heartbeat every this many bytes read
Progress = Callable[[int, int], None]


def run_snapshot_job(
    *,
    job_id: str,
    jobs: JobStore,
    collections: CollectionStore,
    embedders: EmbedderCache,
    on_progress: Progress | None = None,
) -> JobStatus:
    """Run a snapshot or restore job to its end (the caller has marked it started)."""
    job = jobs.get(job_id)
    spec = jobs.payload(job_id)[0]

    def progress(done: int, total: int) -> None:
        jobs.progress(job_id, done, total)
        if on_progress is not None:
            on_progress(done, total)  # a `vela worker`'s heartbeat

    def cancelled() -> bool:
        return jobs.cancel_requested(job_id)

    try:
        if job.kind == JobKind.SNAPSHOT:
            result = write_snapshot(job_id, spec, jobs, collections, progress, cancelled)
        else:
            result = restore_snapshot(job_id, spec, jobs, collections, embedders, progress, cancelled)
    except JobCancelled:
        return end_job(jobs, job_id, JobStatus.CANCELLED)
    return end_job(jobs, job_id, JobStatus.SUCCEEDED, result=result)


# A job's work in a snapshots folder: `.<job id>.work` and `.<job id>.tar.tmp` (write_snapshot).
JOB_WORK = re.compile(r"\.([0-9a-f]{32})\.(?:work|tar\.tmp)")
# velaio.files.write_atomic's temporary file (a record being written): `.<name>.<hex>.tmp`.
ATOMIC_TEMP = re.compile(r"\..+\.[0-9a-f]{32}\.tmp")
TEMP_AGE_S = 3600.0


def sweep_folder(folder: Path, jobs: JobStore) -> list[str]:
    """Remove what jobs that are over left in a snapshots folder: work folders and temporary tars (`.<job>.*`), and
    the record of a snapshot whose tar is gone (a delete cut short). An unfinished job's work stays for its re-run."""
    removed = []
    for entry in folder.iterdir():
        if (work := JOB_WORK.fullmatch(entry.name)) is not None:
            job = work.group(1)
        elif ATOMIC_TEMP.fullmatch(entry.name):  # a write_atomic cut short; a live one is milliseconds old
            with contextlib.suppress(OSError):
                if time.time() - entry.stat().st_mtime > TEMP_AGE_S:
                    entry.unlink()
                    removed.append(entry.name)
            continue
        elif entry.suffix == ".json" and not entry.with_suffix(".tar").exists():
            info = read_info(entry.with_suffix(".tar"))
            job = info.job if info is not None else ""
        else:
            continue
        if job and job_alive(jobs)(job):
            continue
        removed.append(entry.name)
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return removed


def embedder_name(coll: Collection, spec: dict[str, Any]) -> str:
    """The name clients know the model by (never its folder): the API's, unless a promotion changed the serving
    generation since; then the name the reindex that made it was given."""
    if coll.settings.embedder == spec.get("embedder"):
        return str(spec.get("embedder_name") or UNREGISTERED)
    pointer = gens.read_pointer(gens.collection_root(coll))
    return pointer.name_of(gens.generation_of(coll)) or UNREGISTERED


def _backup(source: Path, target: Path, step: Callable[[float], None]) -> None:
    """SQLite's online backup of a doc store into one self-contained file (no WAL beside it)."""
    src = connect_sqlite(source)
    dst = sqlite3.connect(target, isolation_level=None)
    try:
        src.backup(dst, pages=BACKUP_PAGES, progress=lambda _s, remaining, total: step(1 - remaining / max(total, 1)))
        dst.execute("PRAGMA journal_mode=DELETE")
    finally:
        dst.close()
        src.close()


def _copy_collection(coll: Collection, work: Path, name: str, progress: Callable[[int], None]) -> dict[str, Any]:
    """Copy the doc stores, settings (the model by its name: no server path leaves the server) and context into
    `work` (the caller holds the writer lock); returns the counts."""
    documents = passages = 0
    counts = [s.docstore.counts() for s in coll.shard_list]
    done = 0
    for shard, (docs, psgs) in zip(coll.shard_list, counts, strict=True):
        rel = shard.root.relative_to(coll.root)
        (work / rel).mkdir(parents=True, exist_ok=True)

        def step(fraction: float, before: int = done, size: int = docs) -> None:
            progress(before + int(fraction * size))

        _backup(shard.docstore.path, work / rel / "docs.sqlite3", step)
        done += docs
        documents, passages = documents + docs, passages + psgs
    for holder in {id(c): c for c in [coll, *coll.shard_list]}.values():
        settings = json.loads((holder.root / SETTINGS_FILE).read_bytes())
        settings["embedder"] = name
        (work / holder.root.relative_to(coll.root) / SETTINGS_FILE).write_text(json.dumps(settings, indent=2))
    context = coll.root / CONTEXT_DIR
    if context.is_dir():
        shutil.copytree(context, work / CONTEXT_DIR, ignore=shutil.ignore_patterns(".*", "*.tmp"))
    return {"documents": documents, "passages": passages}


class _Reading(io.RawIOBase):
    """A file read through for tarfile, with a heartbeat every HEARTBEAT_BYTES (a big doc store takes a while)."""

    def __init__(self, f: io.BufferedReader, heartbeat: Callable[[], None]) -> None:
        self.f, self.heartbeat, self.seen = f, heartbeat, 0

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.seen += len(data)
        if self.seen >= HEARTBEAT_BYTES:
            self.seen = 0
            self.heartbeat()
        return data


def _sha256(path: Path, heartbeat: Callable[[], None]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        reader = _Reading(f, heartbeat)
        while chunk := reader.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _pack(work: Path, tmp: Path, manifest: dict[str, Any], heartbeat: Callable[[], None]) -> None:
    """snapshot.json first (a listing or a restore reads it alone), then every file in the manifest's order."""

    def entry(name: str, size: int) -> tarfile.TarInfo:
        member = tarfile.TarInfo(name)
        member.size, member.mtime, member.mode = size, int(manifest["created_at"]), 0o644
        return member

    body = json.dumps(manifest, indent=2, sort_keys=True).encode()
    # Owner-only, as the client writes its downloads: a snapshot holds every document of the collection.
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            tar.addfile(entry(MANIFEST, len(body)), io.BytesIO(body))
            for rel, facts in manifest["files"].items():
                with open(work / rel, "rb") as f:
                    tar.addfile(entry(rel, facts["bytes"]), _Reading(f, heartbeat))
        raw.flush()
        os.fsync(raw.fileno())


def _member_order(work: Path) -> list[str]:
    files = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
    return sorted(files, key=lambda rel: (rel != SETTINGS_FILE, rel))  # collection.json right after the manifest


def write_snapshot(
    job_id: str,
    spec: dict[str, Any],
    jobs: JobStore,
    collections: CollectionStore,
    progress: Progress,
    cancelled: Callable[[], bool],
) -> dict[str, Any]:
    coll = collections.get(spec["collection"])  # CollectionNotFound: the job is cancelled (deleted meanwhile)
    folder = from_data_dir(spec["dir"], collections.data_dir) / coll.name
    work, tmp = folder / f".{job_id}.work", folder / f".{job_id}.tar.tmp"
    shutil.rmtree(work, ignore_errors=True)
    # The work folder first, with the collection's folder: a folder that holds it is never removed as empty (the
    # tidy-up when a dropped collection's last snapshot is deleted).
    work.mkdir(parents=True)
    sweep_folder(folder, jobs)
    name = str((jobs.get(job_id).result or {}).get("snapshot") or new_name(coll.name))
    while (done := read_info(folder / name)) is not None and done.job != job_id:
        name = new_name(coll.name)  # another job's, made in the same second with the same 6 hex: one more draw
    jobs.set_result(job_id, {"snapshot": name})  # before the snapshot is written: a re-run makes this one
    final = folder / name
    if final.is_file() and done is not None:  # renamed into place before a crash: it is whole
        shutil.rmtree(work, ignore_errors=True)
        return _result(done)
    try:
        with gens.serving_writer(coll, collections.follow) as coll:
            coll.reload_settings()
            total = sum(s.docstore.counts()[0] for s in coll.shard_list)
            model = embedder_name(coll, spec)
            counts = _copy_collection(coll, work, model, lambda d: progress(d, total))
            generation, settings = gens.generation_of(coll), coll.settings
        if cancelled():
            raise JobCancelled()

        def beat() -> None:
            progress(total, total)

        created = time.time()
        order = _member_order(work)
        files = {rel: {"sha256": _sha256(work / rel, beat), "bytes": (work / rel).stat().st_size} for rel in order}
        manifest = {
            "format": FORMAT_VERSION,
            "collection": coll.name,
            "generation": generation,
            "created_at": created,
            # A model no registry name reaches restores only where it is the server's own VELA_EMBEDDER: the
            # folder's digest says which, without showing it.
            "embedder": {"name": model, "dims": settings.dim, "folder_sha256": folder_digest(settings.embedder)},
            "shards": settings.shards,
            "schema": settings.schema,
            "settings": {k: v for k, v in settings.to_json().items() if k not in ("embedder", "name")},
            **counts,
            "files": files,
        }
        _pack(work, tmp, manifest, beat)
        size, digest = tmp.stat().st_size, _sha256(tmp, beat)
        info = SnapshotInfo(name, coll.name, created, size, counts["documents"], counts["passages"], digest, job_id)
        write_info(final, info)  # first: a tar in place always has its record
        tmp.rename(final)
        fsync_dir(folder)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    progress(total, total)
    log.info("snapshot written", extra={"collection": coll.name, "snapshot": name, "bytes": info.bytes})
    return _result(info)


def _result(info: SnapshotInfo) -> dict[str, Any]:
    return {"snapshot": info.name, "bytes": info.bytes, "documents": info.documents, "sha256": info.sha256}


__all__ = ["run_snapshot_job", "sweep_folder", "write_snapshot"]
