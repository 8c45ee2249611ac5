"""Restoring a snapshot (indexing/snapshots.py writes them) as a new collection, atomically.

The tar is read once, as a stream: snapshot.json first (format version, the files and their sha256), then each
file, which must be one snapshot.json lists, is extracted with tarfile's `data` filter into a hidden folder beside
the collections and checked against its sha256; the whole file is checked against the sha256 recorded when it was
written. Only then are the settings adopted (the new name, the model this server loads for the snapshot's model
name) and the index rebuilt from the doc stores, and the folder renamed into place: a collection appears whole or
not at all. A restore killed before the rename leaves only the hidden folder, which start-up maintenance removes
once its job is over (`clean_restore_leftovers`); run again, the job starts over, or sees its rename done.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import shutil
import tarfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from indexing.collection import SETTINGS_FILE, CollectionConflict, CollectionSettings, load_settings, validate_name
from indexing.context import commit_collection
from indexing.jobs import JobStore
from indexing.reindex import job_alive
from indexing.snapshot_format import SnapshotInvalid, read_manifest_member
from indexing.store import CollectionStore, open_collection
from models import EmbedderCache
from velaio.files import from_data_dir, fsync_dir, fsync_tree, write_atomic

log = logging.getLogger("vela.snapshots")
RESTORE_PREFIX = ".restore-"  # <collections>/.restore-<job id>/: a restore being built
HEARTBEAT_BYTES = 8 << 20


class JobCancelled(Exception):
    pass


class _Hashing(io.RawIOBase):
    """The snapshot file as tarfile reads it: every byte also goes through sha256, with a heartbeat now and then."""

    def __init__(self, f: io.BufferedReader, heartbeat: Callable[[], None]) -> None:
        self.f, self.heartbeat, self.digest, self.seen = f, heartbeat, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.digest.update(data)
        self.seen += len(data)
        if self.seen >= HEARTBEAT_BYTES:
            self.seen = 0
            self.heartbeat()
        return data


def _check_member(member: tarfile.TarInfo, files: dict[str, Any], seen: set[str]) -> None:
    if member.name not in files:
        raise SnapshotInvalid(f"the tar holds {member.name[:100]!r}, which snapshot.json does not list")
    # A sparse member (GNU or PAX) would extract to its declared size from a few bytes of tar: an upload of
    # kilobytes could write and hash gigabytes. Plain members only, each exactly the size snapshot.json records,
    # so that what a restore writes is bounded by the tar it reads.
    if member.name in seen or not member.isfile() or member.issparse():
        raise SnapshotInvalid(f"the tar holds {member.name!r} twice, or not as a plain file")
    if member.size != files[member.name]["bytes"]:
        raise SnapshotInvalid(
            f"{member.name} is {member.size} bytes, not the {files[member.name]['bytes']} that snapshot.json lists"
        )


RECORDED = "recorded when it was written"  # a server-side snapshot's listing
UPLOAD_GIVEN = "given with the upload"  # POST /snapshots/upload?sha256=


def extract_verified(
    source: Path, dest: Path, expected_sha256: str | None, heartbeat: Callable[[], None], expected_from: str = RECORDED
) -> dict[str, Any]:
    """Extract the snapshot into `dest` (a new folder), checking the format, every member against snapshot.json,
    and the whole file against `expected_sha256`; SnapshotInvalid naming the fault. Returns snapshot.json."""
    dest.mkdir(parents=True)
    try:
        with open(source, "rb") as raw:
            reader = _Hashing(raw, heartbeat)
            with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
                manifest = read_manifest_member(tar, tar.next())
                files: dict[str, Any] = manifest["files"]
                seen: set[str] = set()
                while (member := tar.next()) is not None:
                    _check_member(member, files, seen)
                    seen.add(member.name)
                    tar.extract(member, dest, filter="data")
                    with open(dest / member.name, "rb") as f:
                        digest = hashlib.file_digest(f, "sha256").hexdigest()
                    if digest != files[member.name]["sha256"]:
                        raise SnapshotInvalid(
                            f"{member.name} does not match its sha256 in snapshot.json: the snapshot is damaged"
                        )
            while reader.read(1 << 20):  # the tar's end padding: part of the file's checksum too
                pass
    except (tarfile.TarError, EOFError) as exc:
        raise SnapshotInvalid(f"not a readable tar ({exc}): the snapshot is damaged") from exc
    missing = sorted(set(files) - seen)
    if missing:
        raise SnapshotInvalid(f"the tar lacks {missing[:3]}, which snapshot.json lists: the snapshot is cut short")
    if expected_sha256 is not None and (actual := reader.digest.hexdigest()) != expected_sha256:
        raise SnapshotInvalid(
            f"the file's sha256 is {actual}, not the {expected_sha256} {expected_from}: "
            + (
                "the file is damaged"
                if expected_from == RECORDED
                else "the file or the sha256 given is not the one meant"
            )
        )
    return manifest


def _adopt_settings(
    root: Path, manifest: dict[str, Any], into: str, embedder: str, created: float
) -> CollectionSettings:
    """The snapshot's settings files, renamed `into` with this server's model and a new creation time (a new
    collection: nothing cached for an earlier one of the same name is reused)."""
    try:
        settings = load_settings(root)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SnapshotInvalid(f"{SETTINGS_FILE} cannot be read ({type(exc).__name__})") from exc
    if settings.shards != manifest["shards"] or settings.dim != manifest["embedder"].get("dims"):
        raise SnapshotInvalid(f"{SETTINGS_FILE} disagrees with snapshot.json (shards or dims)")
    settings = replace(settings, name=into, embedder=embedder, created_at=created)
    holders = [(root, settings)]
    if settings.shards > 1:
        holders += [
            (root / "shards" / f"s{i:03d}", replace(settings, name=f"{into}.s{i:03d}", shards=1))
            for i in range(settings.shards)
        ]
    for folder, held in holders:
        write_atomic(folder / SETTINGS_FILE, json.dumps(held.to_json(), indent=2).encode())
    return settings


def _refuse_existing(collections: CollectionStore, into: str) -> None:
    if collections.is_collection(into) or collections.aliases.target(into) is not None:
        raise CollectionConflict(
            f"{into!r} is already a collection or an alias: restore into a new name (then point an alias at it)"
        )
    leftover = collections.root / into
    if leftover.exists():  # no settings file: what was left of a deleted collection, never a collection
        trash = collections.root.parent / "trash" / f"{into}-{uuid.uuid4().hex}"
        trash.parent.mkdir(parents=True, exist_ok=True)
        leftover.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)


def restored_by(collections: CollectionStore, into: str, created: Any) -> bool:
    """Whether `into` is the collection this job renamed into place before a crash (its creation time is the one
    the job recorded)."""
    if created is None or not collections.is_collection(into):
        return False
    try:
        return load_settings(collections.root / into).created_at == created
    except (OSError, ValueError, KeyError):
        return False


def restore_snapshot(
    job_id: str,
    spec: dict[str, Any],
    jobs: JobStore,
    collections: CollectionStore,
    embedders: EmbedderCache,
    progress: Callable[[int, int], None],
    cancelled: Callable[[], bool],
) -> dict[str, Any]:
    """Make the collection `spec["into"]` from the snapshot file `spec["snapshot"]` (a path the server found, or
    an upload it received: that file goes once the restore ends, whichever way)."""
    try:
        result = _restore(job_id, spec, jobs, collections, embedders, progress, cancelled)
    except Exception:  # the job ends, failed or cancelled (a kill ends nothing: its re-run needs the file)
        _drop_upload(spec, collections)
        raise
    _drop_upload(spec, collections)
    return result


def _drop_upload(spec: dict[str, Any], collections: CollectionStore) -> None:
    if spec.get("upload"):
        from_data_dir(spec["snapshot"], collections.data_dir).unlink(missing_ok=True)


def _restore(
    job_id: str,
    spec: dict[str, Any],
    jobs: JobStore,
    collections: CollectionStore,
    embedders: EmbedderCache,
    progress: Callable[[int, int], None],
    cancelled: Callable[[], bool],
) -> dict[str, Any]:
    into = validate_name(spec["into"])
    prior = jobs.get(job_id).result or {}
    if restored_by(collections, into, prior.get("created_at")):
        return prior
    _refuse_existing(collections, into)
    source = from_data_dir(spec["snapshot"], collections.data_dir)
    if not source.is_file():
        raise SnapshotInvalid("the snapshot is gone (deleted since the restore was asked for)")
    tmp = collections.root / f"{RESTORE_PREFIX}{job_id}"
    shutil.rmtree(tmp, ignore_errors=True)  # an earlier attempt's: started over
    try:

        def heartbeat() -> None:  # every few MB read: the job is alive, and a cancel stops the extraction
            progress(0, 0)
            if cancelled():
                raise JobCancelled()

        given = UPLOAD_GIVEN if spec.get("upload") else RECORDED
        manifest = extract_verified(source, tmp, spec.get("sha256"), heartbeat, given)
        total = int(manifest.get("documents", 0))
        progress(0, total)
        if cancelled():
            raise JobCancelled()
        model = manifest["embedder"].get("name")
        try:
            embedder = embedders.get(spec["embedder"])
        except (OSError, ValueError) as exc:
            raise SnapshotInvalid(f"the model {model!r} does not load on this server ({type(exc).__name__})") from exc
        if embedder.dim != manifest["embedder"].get("dims"):
            raise SnapshotInvalid(
                f"the model {model!r} on this server makes {embedder.dim}-dim vectors; the snapshot's are "
                f"{manifest['embedder'].get('dims')}-dim: not the same model"
            )
        created = time.time()
        settings = _adopt_settings(tmp, manifest, into, spec["embedder"], created)
        coll = open_collection(tmp, settings)
        try:
            with coll.writer():
                coll.sync_order_keys()  # a snapshot made before ordered scrolls has no sort keys
                commit_collection(coll, embedder)  # the index, rebuilt from the doc stores
        finally:
            coll.close()
        if cancelled():  # asked while the index was rebuilt: nothing is visible yet
            raise JobCancelled()
        fsync_tree(tmp)
        # an upload's file has a server-made name no listing shows: the result names no snapshot then
        shown = None if spec.get("upload") else source.name
        # the sha256 lets a retry of the same request find this job (service/snapshot_api.py `earlier_restore`)
        result = {
            "collection": into,
            "snapshot": shown,
            "documents": total,
            "created_at": created,
            "sha256": spec.get("sha256"),
        }
        jobs.set_result(job_id, result)  # before the rename: a re-run then knows the collection is its own
        with collections.placing(into, settings.shards):  # the shard cap again: other collections came meanwhile
            _refuse_existing(collections, into)
            try:
                tmp.rename(collections.root / into)
            except OSError as exc:  # made by another request meanwhile
                raise CollectionConflict(f"{into!r} was created while the snapshot was restored") from exc
        fsync_dir(collections.root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    progress(total, total)
    log.info("snapshot restored", extra={"collection": into, "snapshot": source.name, "job_id": job_id})
    return result


def clean_restore_leftovers(collections: CollectionStore, jobs: JobStore) -> list[str]:
    """At start-up: the folders of restores whose job is over (a crash or a kill cut them short). A restore still
    unfinished keeps its folder: it starts over from the snapshot anyway when it runs again."""
    removed = []
    alive = job_alive(jobs)
    for entry in collections.root.iterdir():
        if not entry.name.startswith(RESTORE_PREFIX):
            continue
        if not alive(entry.name.removeprefix(RESTORE_PREFIX)):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    if removed:
        log.info("restore leftovers removed", extra={"removed": removed})
    return removed
