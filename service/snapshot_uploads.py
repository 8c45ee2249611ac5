"""Snapshot uploads: `POST /snapshots/upload` receives a tar into the server's own folder and queues its restore.

The file lives in `<snapshots dir>/.uploads/<uuid>.tar` until its restore ends. Uploads may run at once; a sweep
(at start-up, and before each upload) removes what no unfinished restore needs, under a folder lock that keeps it
from judging a file between an upload's steps.
"""

from __future__ import annotations

import contextlib
import fcntl
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from anyio import to_thread

from indexing.collection import validate_name
from indexing.jobs import Job, JobKind, JobNotFound
from indexing.snapshot_format import read_manifest
from service.capacity import check_room
from service.snapshot_api import check_new_name, earlier_restore, queue_restore, restore_model, snapshots_root
from service.state import AppState
from velaio.files import from_data_dir, in_data_dir

UPLOADS = ".uploads"  # <snapshots dir>/.uploads/<uuid>.tar: an uploaded snapshot until its restore ends

SWEEP_LOCK = ".sweep.lock"  # in the uploads folder: a sweep holds it exclusively, an upload's two steps shared


@contextlib.contextmanager
def _folder_lock(folder: Path, mode: int) -> Iterator[None]:
    """flock on the uploads folder's lock file: LOCK_EX for a sweep, LOCK_SH around the two moments an upload
    changes what a sweep would judge (its file appearing and locked; its job queued and the file unlocked), so a
    sweep never sees a file between those steps, however many uploads run at once."""
    with open(folder / SWEEP_LOCK, "a+b") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def sweep_uploads(state: AppState) -> None:
    """At start-up: remove what uploads cut short by a crash left (a restarted server would otherwise keep them
    until the next upload)."""
    folder = snapshots_root(state.settings) / UPLOADS
    if folder.is_dir():
        _sweep_uploads(folder, state)


def _sweep_uploads(folder: Path, state: AppState) -> None:
    """Uploads no unfinished restore needs (a process died while it received one, or its restore was killed): an
    upload still being received holds a lock on its file, and one whose restore waits is named in that job."""
    with _folder_lock(folder, fcntl.LOCK_EX):
        _sweep_locked(folder, state)


def _sweep_locked(folder: Path, state: AppState) -> None:
    needed = set()
    for job_id in state.jobs.unfinished():
        try:
            payload = state.jobs.payload(job_id) if state.jobs.get(job_id).kind == JobKind.RESTORE else []
        except JobNotFound:
            continue
        if payload and payload[0].get("snapshot"):
            needed.add(str(from_data_dir(str(payload[0]["snapshot"]), state.settings.data_dir).resolve()))
    for entry in folder.iterdir():
        if str(entry.resolve()) in needed or entry.name == SWEEP_LOCK:
            continue
        with contextlib.suppress(FileNotFoundError), open(entry, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # being received
            entry.unlink(missing_ok=True)


async def submit_upload(*, state: AppState, into: str, body: AsyncIterator[bytes], sha256: str | None) -> Job:
    """Receive a snapshot into the server's folder and queue its restore as `into`: ValueError, CollectionConflict
    (before a byte is stored), SnapshotInvalid, SnapshotModelUnavailable. The file goes when its restore ends. The
    same upload sent again (the same `into` and sha256) gets the job it made, and its body is not stored."""
    validate_name(into)
    if (same := earlier_restore(state=state, into=into, sha256=sha256)) is not None:
        return same
    check_new_name(state=state, into=into)
    # Refused before a byte is stored: the tar lands in the snapshots folder, the restore in the data directory.
    await to_thread.run_sync(check_room, state.settings, state.jobs, [snapshots_root(state.settings)])
    folder = snapshots_root(state.settings) / UPLOADS
    folder.mkdir(parents=True, exist_ok=True)
    await to_thread.run_sync(_sweep_uploads, folder, state)
    path = folder / f"{uuid.uuid4().hex}.tar"
    f = await to_thread.run_sync(_created_locked, folder, path)
    try:
        async for chunk in body:
            await to_thread.run_sync(f.write, chunk)
        await to_thread.run_sync(f.flush)
        manifest = await to_thread.run_sync(read_manifest, path)
        model = restore_model(state=state, manifest=manifest)
        await to_thread.run_sync(state.collections.check_shard_room, into, int(manifest["shards"]))
        snapshot = in_data_dir(path, state.settings.data_dir)
        spec = {"snapshot": snapshot, "sha256": sha256, "into": into, "embedder": model, "upload": True}
        job, new = await to_thread.run_sync(_queued_unlocked, folder, f, lambda: queue_restore(state=state, spec=spec))
        if not new:  # the same upload, sent twice at once: the other one's file is restored
            path.unlink(missing_ok=True)
        return job
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        f.close()


def _created_locked(folder: Path, path: Path) -> BinaryIO:
    """The upload's file, created and locked (held until its restore job names it) while no sweep runs."""
    with _folder_lock(folder, fcntl.LOCK_SH):
        f = open(path, "wb")  # noqa: SIM115  closed by the caller, after the job is queued
        fcntl.flock(f, fcntl.LOCK_EX)
        return f


def _queued_unlocked(folder: Path, f: BinaryIO, queue: Callable[[], tuple[Job, bool]]) -> tuple[Job, bool]:
    """Queue the restore and let go of the file while no sweep runs: a later sweep finds the job naming it."""
    with _folder_lock(folder, fcntl.LOCK_SH):
        job = queue()
        f.close()
        return job


__all__ = ["SWEEP_LOCK", "UPLOADS", "submit_upload", "sweep_uploads"]
