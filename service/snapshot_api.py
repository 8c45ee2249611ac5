"""Domain functions behind the snapshot routes (keyword-only; no HTTP here): take a snapshot, list, find and delete
snapshots, restore one into a new collection, and restore an uploaded one.

Snapshots live in the server's own folder (VELA_SNAPSHOTS_DIR, default `<data dir>/snapshots`); a request names a
snapshot only by a name the server made, which is looked up in a listing of that folder (indexing/snapshot_format.py).
A restore names its model by the name the snapshot records, resolved through this server's registry as a request's
`embedder` is: no path from a snapshot is ever loaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from anyio import to_thread

from indexing.collection import CollectionConflict, CollectionNotFound, validate_name
from indexing.jobs import Job, JobKind, JobNotFound, JobStatus
from indexing.snapshot_format import (
    SNAPSHOT_NAME,
    UNREGISTERED,
    SnapshotInfo,
    SnapshotInvalid,
    SnapshotNotFound,
    delete_snapshot,
    find_snapshot,
    folder_digest,
    list_snapshots,
    read_manifest,
)
from indexing.snapshot_restore import restored_by
from service.model_registry import (
    ModelKindMismatch,
    UnknownModelName,
    UnusableModel,
    public_model_name,
    request_model,
)
from service.settings import Settings
from service.state import AppState

UPLOADS = ".uploads"  # <snapshots dir>/.uploads/<uuid>.tar: an uploaded snapshot until its restore ends
RESTORE_KINDS = frozenset({JobKind.RESTORE})


class SnapshotModelUnavailable(ValueError):
    """The snapshot's model cannot be served here: the restore would change nothing, so it is refused at once."""


def snapshots_root(settings: Settings) -> Path:
    """VELA_SNAPSHOTS_DIR, else `<data dir>/snapshots`."""
    root = settings.snapshots_dir if settings.snapshots_dir is not None else settings.data_dir / "snapshots"
    return root.expanduser().resolve()


def snapshot_owners(*, state: AppState, collection: str) -> list[str]:
    """The collections whose snapshots a name reaches: an alias's target (or the collection itself), and, when the
    name is an alias that a deleted collection's snapshots are still kept under, that collection too, so that an
    alias made later with a deleted collection's name never hides its backups. CollectionNotFound for none: a
    deleted collection counts while it has a snapshot listed (the folder a cancelled job left empty is no trace)."""
    root = snapshots_root(state.settings)
    target = state.collections.resolve(collection)
    owners = [n for n in dict.fromkeys((target, collection)) if n == target and state.collections.is_collection(n)]
    owners += [n for n in dict.fromkeys((target, collection)) if n not in owners and list_snapshots(root, n)]
    if not owners:
        raise CollectionNotFound(collection)
    return owners


def submit_snapshot(*, state: AppState, collection: str) -> Job:
    """Queue a snapshot of the collection's serving generation. CollectionNotFound before anything is queued."""
    coll = state.collections.get(collection)  # an alias's target, recorded as it is now
    stored = coll.settings.embedder
    spec = {
        "collection": coll.name,
        "dir": str(snapshots_root(state.settings)),  # the server's folder, resolved where the listing reads it
        "embedder": stored,
        "embedder_name": public_model_name(settings=state.settings, stored=stored),
    }
    job = state.jobs.create(collection=coll.name, kind=JobKind.SNAPSHOT, payload=[spec])
    state.queue.submit(job.id)
    return job


def snapshots_of(*, state: AppState, collection: str) -> list[SnapshotInfo]:
    """Newest first; each entry names the collection it was taken of."""
    root = snapshots_root(state.settings)
    found = [
        info for owner in snapshot_owners(state=state, collection=collection) for info in list_snapshots(root, owner)
    ]
    return sorted(found, key=lambda i: (i.created_at, i.name), reverse=True)


def _owner_of(*, state: AppState, collection: str, snapshot: str) -> str:
    """Which of the name's collections holds the snapshot (a snapshot's name begins with its collection's)."""
    owners = snapshot_owners(state=state, collection=collection)
    match = SNAPSHOT_NAME.fullmatch(snapshot)
    return match["collection"] if match and match["collection"] in owners else owners[0]


def snapshot_file(*, state: AppState, collection: str, snapshot: str) -> tuple[Path, SnapshotInfo]:
    """The file of a listed snapshot. CollectionNotFound, SnapshotNotFound."""
    owner = _owner_of(state=state, collection=collection, snapshot=snapshot)
    return find_snapshot(snapshots_root(state.settings), owner, snapshot)


def remove_snapshot(*, state: AppState, collection: str, snapshot: str) -> None:
    owner = _owner_of(state=state, collection=collection, snapshot=snapshot)
    delete_snapshot(snapshots_root(state.settings), owner, snapshot)


def check_new_name(*, state: AppState, into: str) -> str:
    """A name a restore may take: a valid collection name (ValueError) that no collection or alias has
    (CollectionConflict)."""
    validate_name(into)
    if state.collections.is_collection(into) or state.collections.aliases.target(into) is not None:
        raise CollectionConflict(
            f"{into!r} is already a collection or an alias: restore into a new name (then point an alias at it)"
        )
    return into


def restore_model(*, state: AppState, manifest: dict[str, Any]) -> str:
    """What this server loads for the snapshot's model: its registry name resolved here, or, for a model that had
    none, this server's own VELA_EMBEDDER when it is the same folder. SnapshotModelUnavailable otherwise."""
    model = manifest["embedder"]
    name = model.get("name")
    if isinstance(name, str) and name != UNREGISTERED:
        try:
            chosen = request_model(settings=state.settings, name=name, kind="embedder", field="embedder")
        except (UnknownModelName, ModelKindMismatch, UnusableModel) as exc:
            shown = repr(name) if len(name) <= 64 else "of the snapshot"
            raise SnapshotModelUnavailable(
                f"the snapshot's model {shown} is not a registered embedder on this server: register the same "
                "model under that name (vela models add), then restore again"
            ) from exc
        return str(state.embedders.resolve(chosen))
    own = str(state.embedders.resolve(state.settings.embedder))
    if model.get("folder_sha256") == folder_digest(own):
        return own
    raise SnapshotModelUnavailable(
        "the snapshot's model had no registry name where it was taken and is not this server's VELA_EMBEDDER: "
        "register the model under one name on both servers (vela models add) and take a new snapshot"
    )


def earlier_restore(*, state: AppState, into: str, sha256: str | None) -> Job | None:
    """The job the same request made before (the same new name, the same snapshot by its sha256), while it is
    queued or running, or once it has succeeded while the collection is still the one it made. A client that lost
    the answer and sends the request again gets that job back instead of a 409, and nothing is stored twice.
    Without a sha256 (an upload that sent none) there is nothing to compare: None."""
    job_id = state.jobs.latest_of(into, RESTORE_KINDS) if sha256 is not None else None
    if job_id is None:
        return None
    try:
        job = state.jobs.get(job_id)
        if job.status in (JobStatus.QUEUED, JobStatus.RUNNING):
            payload = state.jobs.payload(job_id)  # dropped once the job ends: then its result says
            same = bool(payload) and payload[0].get("sha256") == sha256
        else:
            made = job.result or {}
            same = (
                job.status == JobStatus.SUCCEEDED
                and made.get("sha256") == sha256
                and restored_by(state.collections, into, made.get("created_at"))
            )
    except JobNotFound:
        return None
    return job if same else None


def _queue_restore(*, state: AppState, spec: dict[str, Any]) -> tuple[Job, bool]:
    """The restore's job, and whether it is new (False: the same request's, sent just before)."""
    if (same := earlier_restore(state=state, into=spec["into"], sha256=spec.get("sha256"))) is not None:
        return same, False  # an upload that began before its twin was queued, and ended after
    job = state.jobs.create_unless_unfinished(
        collection=spec["into"], kind=JobKind.RESTORE, payload=[spec], kinds=RESTORE_KINDS
    )
    if isinstance(job, str):  # one sent just before is queued or running
        same = earlier_restore(state=state, into=spec["into"], sha256=spec.get("sha256"))
        if same is not None and same.id == job:
            return same, False
        hint = "" if spec.get("sha256") else " (an upload that sends sha256= gets that job back when it is the same)"
        raise CollectionConflict(f"a restore into {spec['into']!r} is under way (job {job}){hint}")
    state.queue.submit(job.id)
    return job, True


def submit_restore(*, state: AppState, collection: str, snapshot: str, into: str) -> Job:
    """Check the request and queue the restore: CollectionNotFound, SnapshotNotFound, ValueError (the name),
    CollectionConflict, SnapshotInvalid (not a snapshot this server reads), SnapshotModelUnavailable. The same
    request sent again gets the job it made (`earlier_restore`)."""
    path, info = snapshot_file(state=state, collection=collection, snapshot=snapshot)
    validate_name(into)
    if (same := earlier_restore(state=state, into=into, sha256=info.sha256)) is not None:
        return same
    check_new_name(state=state, into=into)
    model = restore_model(state=state, manifest=read_manifest(path))
    spec = {"snapshot": str(path), "sha256": info.sha256, "into": into, "embedder": model}
    return _queue_restore(state=state, spec=spec)[0]


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
        if payload:
            needed.add(str(payload[0].get("snapshot")))
    for entry in folder.iterdir():
        if str(entry) in needed or entry.name == SWEEP_LOCK:
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
        spec = {"snapshot": str(path), "sha256": sha256, "into": into, "embedder": model, "upload": True}
        job, new = await to_thread.run_sync(_queued_unlocked, folder, f, lambda: _queue_restore(state=state, spec=spec))
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


__all__ = [
    "SnapshotInvalid",
    "SnapshotModelUnavailable",
    "SnapshotNotFound",
    "check_new_name",
    "earlier_restore",
    "remove_snapshot",
    "snapshot_file",
    "snapshot_owners",
    "snapshots_of",
    "snapshots_root",
    "submit_restore",
    "submit_snapshot",
    "submit_upload",
    "sweep_uploads",
]
