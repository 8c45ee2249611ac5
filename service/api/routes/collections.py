from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response, status

from indexing.collection import CollectionNotFound
from service.deps import State
from service.documents import delete_collection, submit_delete
from service.errors import ApiError
from service.schemas import CollectionList, CollectionOut, ErrorResponse, JobAccepted

router = APIRouter(prefix="/collections", tags=["collections"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}


def not_found(name: str) -> ApiError:
    return ApiError(404, "collection_not_found", f"no collection named {name!r}")


@router.get("", response_model=CollectionList)
def list_collections(state: State) -> CollectionList:
    out = []
    for name in state.collections.names():
        try:
            out.append(CollectionOut(**state.collections.get(name).stats()))
        except CollectionNotFound:
            continue  # deleted while listing
    return CollectionList(collections=out)


@router.get("/{name}", response_model=CollectionOut, responses=NOT_FOUND)
def get_collection(name: str, state: State) -> CollectionOut:
    """Counts, embedder, dims and index sizes (of the collection an alias points at, for an alias)."""
    try:
        return CollectionOut(**state.collections.get(name).stats())
    except CollectionNotFound as exc:
        raise not_found(name) from exc


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
def remove_collection(name: str, state: State) -> Response:
    """Delete a collection, its documents and indexes; its pending jobs are cancelled. Named through an alias, the
    collection it points at is deleted; every alias of a deleted collection goes with it."""
    try:
        delete_collection(state=state, name=state.collections.resolve(name))
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# `:path` so that any document id can be addressed, "/" included (percent-encode it, or not): ids are free-form
# strings at ingest, and every id that can be indexed must be deletable.
@router.delete(
    "/{name}/documents/{doc_id:path}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses=NOT_FOUND,
)
def remove_document(name: str, doc_id: str, state: State, request: Request) -> JobAccepted:
    """Delete one document (through the job queue, like every write); follow the returned job."""
    try:
        job = submit_delete(state=state, collection=state.collections.resolve(name), doc_ids=[doc_id])
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    return JobAccepted(job_id=job.id, status=job.status.value, url=str(request.url_for("get_job", job_id=job.id)))
