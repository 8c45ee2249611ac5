"""/collections/{name}/snapshots: back up a collection to a tar the server keeps, list, download and delete those,
restore one into a new collection; /snapshots/upload restores a tar taken on another server."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import FileResponse

from indexing.collection import CollectionConflict, CollectionNotFound
from indexing.jobs import Job
from indexing.shard_budget import ShardLimitExceeded
from service.api.json_body import JsonRoute
from service.deps import State
from service.errors import ApiError, shown
from service.schemas import ErrorResponse, JobAccepted
from service.snapshot_api import (
    SnapshotInvalid,
    SnapshotModelUnavailable,
    SnapshotNotFound,
    remove_snapshot,
    snapshot_file,
    snapshots_of,
    submit_restore,
    submit_snapshot,
)
from service.snapshot_schemas import RestoreRequest, SnapshotList, SnapshotOut
from service.snapshot_uploads import submit_upload

router = APIRouter(prefix="/collections", tags=["snapshots"], route_class=JsonRoute)
upload_router = APIRouter(prefix="/snapshots", tags=["snapshots"], route_class=JsonRoute)
# The one route whose body is not JSON: a tar streamed to disk, bounded by VELA_MAX_REQUEST_BYTES alone.
UPLOAD_PATH = "/snapshots/upload"
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse, "description": "no such collection"}}
SNAPSHOT_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "no such collection, or no snapshot of that name in its listing"}
}
RESTORE_ERRORS: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorResponse,
        "description": "`into` is a collection or an alias, or a restore into it runs (conflict); "
        "the data directory holds all the shards it may (limit_exceeded)",
    },
    422: {"model": ErrorResponse, "description": "not a snapshot this server reads, or its model is not here"},
}


def _collection_not_found(name: str) -> ApiError:
    return ApiError(404, "collection_not_found", f"no collection named {shown(name)}")


def _snapshot_not_found(name: str) -> ApiError:
    return ApiError(404, "snapshot_not_found", f"no snapshot named {shown(name)} (GET the collection's snapshots)")


def _accepted(job: Job, request: Request) -> JobAccepted:
    return JobAccepted(job_id=job.id, status=job.status.value, url=str(request.url_for("get_job", job_id=job.id)))


@router.post("/{name}/snapshots", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted, responses=NOT_FOUND)
def create_snapshot(name: str, state: State, request: Request) -> JobAccepted:
    """Take a snapshot of the collection (of the one an alias points at, and of the generation that serves): its
    documents, passages, embeddings and settings in one tar kept by the server. A job: writes to the collection
    wait while its doc stores are copied; searches go on. The job's `result` names the snapshot, with its size,
    document count and sha256."""
    try:
        return _accepted(submit_snapshot(state=state, collection=name), request)
    except CollectionNotFound as exc:
        raise _collection_not_found(name) from exc


@router.get("/{name}/snapshots", response_model=SnapshotList, responses=NOT_FOUND)
def list_collection_snapshots(name: str, state: State) -> SnapshotList:
    """The collection's snapshots, newest first. Snapshots outlive their collection: a deleted collection's are
    still listed (and can be downloaded, restored and deleted) under its name."""
    try:
        infos = snapshots_of(state=state, collection=name)
    except CollectionNotFound as exc:
        raise _collection_not_found(name) from exc
    return SnapshotList(snapshots=[SnapshotOut(**i.public()) for i in infos])


@router.get(
    "/{name}/snapshots/{snapshot}",
    response_class=FileResponse,
    responses={
        200: {"content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}},
        **SNAPSHOT_NOT_FOUND,
    },
)
def download_snapshot(name: str, snapshot: str, state: State) -> FileResponse:
    """Download a snapshot (streamed). Its sha256 is in the listing."""
    try:
        path, info = snapshot_file(state=state, collection=name, snapshot=snapshot)
    except CollectionNotFound as exc:
        raise _collection_not_found(name) from exc
    except SnapshotNotFound as exc:
        raise _snapshot_not_found(snapshot) from exc
    return FileResponse(path, media_type="application/x-tar", filename=info.name)


@router.delete("/{name}/snapshots/{snapshot}", status_code=status.HTTP_204_NO_CONTENT, responses=SNAPSHOT_NOT_FOUND)
def delete_snapshot(name: str, snapshot: str, state: State) -> Response:
    """Delete a snapshot (`204`)."""
    try:
        remove_snapshot(state=state, collection=name, snapshot=snapshot)
    except CollectionNotFound as exc:
        raise _collection_not_found(name) from exc
    except SnapshotNotFound as exc:
        raise _snapshot_not_found(snapshot) from exc
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{name}/snapshots/{snapshot}/restore",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses={**SNAPSHOT_NOT_FOUND, **RESTORE_ERRORS},
)
def restore_snapshot(name: str, snapshot: str, body: RestoreRequest, state: State, request: Request) -> JobAccepted:
    """Make a new collection, `into`, from a snapshot: the same documents, settings, schema and model, and the same
    hits and scores. A job; the collection appears whole when it succeeds, or not at all. Restoring over an
    existing collection is not offered: restore into a new name, then point an alias at it."""
    try:
        job = submit_restore(state=state, collection=name, snapshot=snapshot, into=body.into)
    except CollectionNotFound as exc:
        raise _collection_not_found(name) from exc
    except SnapshotNotFound as exc:
        raise _snapshot_not_found(snapshot) from exc
    except (CollectionConflict, ShardLimitExceeded, SnapshotInvalid, SnapshotModelUnavailable) as exc:
        raise _restore_refused(exc) from exc
    return _accepted(job, request)


def _restore_refused(exc: Exception) -> ApiError:
    """What a restore or an upload answers when it cannot start: the name is taken, or the file or its model."""
    if isinstance(exc, CollectionConflict):
        return ApiError(409, "conflict", str(exc))
    if isinstance(exc, ShardLimitExceeded):  # the data directory holds all the shards it may
        return ApiError(409, "limit_exceeded", str(exc))
    code = "invalid_snapshot" if isinstance(exc, SnapshotInvalid) else "unknown_model"
    return ApiError(422, code, str(exc))


INTO = Query(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="new collection")
SHA256 = Query(
    pattern=r"^[0-9a-fA-F]{64}$", description="the tar's sha256 (the listing's, any case): checked before it is used"
)


@upload_router.post(
    UPLOAD_PATH.removeprefix(upload_router.prefix),
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses={**RESTORE_ERRORS, 413: {"model": ErrorResponse, "description": "over VELA_MAX_REQUEST_BYTES"}},
    openapi_extra={
        "requestBody": {
            "required": True,
            # Any media type is taken (application/x-tar, say): the body is read as bytes.
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def upload_snapshot(
    request: Request,
    state: State,
    into: Annotated[str, INTO],
    sha256: Annotated[str | None, SHA256] = None,
) -> JobAccepted:
    """Restore a snapshot downloaded from a server (this one or another) as the new collection `into`: the body is
    the tar, at most VELA_MAX_REQUEST_BYTES. Checked as a restore is, then restored the same way."""
    try:
        digest = sha256.lower() if sha256 is not None else None
        job = await submit_upload(state=state, into=into, body=request.stream(), sha256=digest)
    except (CollectionConflict, ShardLimitExceeded, SnapshotInvalid, SnapshotModelUnavailable) as exc:
        raise _restore_refused(exc) from exc
    return _accepted(job, request)
