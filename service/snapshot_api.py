"""Domain functions behind the snapshot routes (keyword-only; no HTTP here): take a snapshot, list, find and delete
snapshots, and restore one into a new collection (an uploaded one: service/snapshot_uploads.py).

Snapshots live in the server's own folder (VELA_SNAPSHOTS_DIR, default `<data dir>/snapshots`); a request names a
snapshot only by a name the server made, which is looked up in a listing of that folder (indexing/snapshot_format.py).
A restore names its model by the name the snapshot records, resolved through this server's registry as a request's
`embedder` is: no path from a snapshot is ever loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
from service.capacity import check_disk
from service.model_registry import (
    ModelKindMismatch,
    UnknownModelName,
    UnusableModel,
    public_model_name,
    request_model,
)
from service.settings import Settings
from service.state import AppState
from velaio.files import in_data_dir

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
    check_disk(state.settings, [snapshots_root(state.settings)])  # the folder may be on a disk of its own
    stored = coll.settings.embedder
    spec = {
        "collection": coll.name,
        # the server's folder, resolved where the listing reads it; inside the data directory, recorded relative
        # to it, so that a data directory moved while the job is queued gets the snapshot where it lists them
        "dir": in_data_dir(snapshots_root(state.settings), state.settings.data_dir),
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
    gone = not state.collections.is_collection(owner)  # a dropped collection's: its folder goes with its last one
    delete_snapshot(snapshots_root(state.settings), owner, snapshot, tidy=gone)


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
            if payload:
                return job if payload[0].get("sha256") == sha256 else None
            job = state.jobs.get(job_id)  # it ended between the two reads (a small restore takes a moment)
        made = job.result or {}
        same = (
            job.status == JobStatus.SUCCEEDED
            and made.get("sha256") == sha256
            and restored_by(state.collections, into, made.get("created_at"))
            # and nothing was asked of it since (a write, a schema change, a reindex): the collection is then
            # no longer what the snapshot holds, and the request is a new restore into a name that is taken
            and state.jobs.latest_of(into, frozenset(JobKind)) == job_id
        )
    except JobNotFound:
        return None
    return job if same else None


def queue_restore(*, state: AppState, spec: dict[str, Any]) -> tuple[Job, bool]:
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
    manifest = read_manifest(path)
    model = restore_model(state=state, manifest=manifest)
    state.collections.check_shard_room(into, int(manifest["shards"]))  # ShardLimitExceeded: the data directory is full
    snapshot = in_data_dir(path, state.settings.data_dir)
    spec = {"snapshot": snapshot, "sha256": info.sha256, "into": into, "embedder": model}
    return queue_restore(state=state, spec=spec)[0]


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
    "queue_restore",
]
