from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request, Response, status

import service.api.doc_id_path  # noqa: F401  registers {doc_id:doc_id} before the routes below
from indexing.collection import NAME_RE, CollectionConflict, CollectionNotFound
from indexing.jobs import Job, JobKind
from service.access import RequestAccess, granted_names, shown_to
from service.access_tokens import FULL, Access
from service.api.creation_errors import creation_errors
from service.api.json_body import JsonRoute
from service.deps import State
from service.document_api import submit_delete_many
from service.documents import create_collection, delete_collection
from service.errors import ApiError, shown
from service.model_registry import (
    ModelKindMismatch,
    UnknownModelName,
    UnusableModel,
    public_model_name,
    shown_model_name,
)
from service.reindex import (
    InvalidChunking,
    NothingToSwitch,
    UnknownDataset,
    generation_info,
    submit_reindex,
    submit_switch,
)
from service.reindex_schemas import ReindexRequest
from service.schemas import CollectionCreate, CollectionList, CollectionOut, ErrorResponse, JobAccepted

router = APIRouter(prefix="/collections", tags=["collections"], route_class=JsonRoute)
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}


def not_found(name: str) -> ApiError:
    return ApiError(404, "collection_not_found", f"no collection named {shown(name)}")


def collection_out(
    state: Any,
    coll: Any,
    *,
    with_generations: bool = False,
    aliases: Mapping[str, str] | None = None,
    access: Access = FULL,
) -> CollectionOut:
    """A collection's facts, its models named as clients name them (never a server path), and the aliases that
    point at it (from `aliases`, every alias and its collection, when the caller has read them already): to a
    scoped token, only those it names, since other aliases may name other tenants."""
    stats = coll.stats()
    every = state.collections.aliases.all() if aliases is None else aliases
    stats["aliases"] = sorted(a for a, target in every.items() if target == coll.name and shown_to(access, a))
    stats["embedder"] = public_model_name(settings=state.settings, stored=stats["embedder"])
    generations = generation_info(state=state, collection=coll.name)
    for gen in generations.values():
        if gen is not None:  # `embedder_name` kept for older clients: the same name
            name = shown_model_name(settings=state.settings, stored=gen["embedder"], recorded=gen.get("embedder_name"))
            gen["embedder"] = gen["embedder_name"] = name
    current = generations.get("current")
    if current is not None:  # the name it was reindexed with, not the first registered name sharing its folder
        stats["embedder"] = current["embedder"]
    return CollectionOut(**stats, generations=generations if with_generations else None)


@router.get("", response_model=CollectionList)
def list_collections(state: State, access: RequestAccess) -> CollectionList:
    out = []
    aliases = state.collections.aliases.all()  # read once for the whole list
    for name in granted_names(access, state.collections.names(), state.collections.resolve):
        try:
            out.append(collection_out(state, state.collections.get(name), aliases=aliases, access=access))
        except CollectionNotFound:
            continue  # deleted while listing
    return CollectionList(collections=out)


@router.get("/{name}", response_model=CollectionOut, responses=NOT_FOUND)
def get_collection(name: str, state: State, access: RequestAccess) -> CollectionOut:
    """Counts, embedder, dims and index sizes (of the collection an alias points at, for an alias), and its
    generations: the one searches read, the one kept for rollback, and one a reindex builds."""
    try:
        coll = state.collections.get(name)
        return collection_out(state, coll, with_generations=True, access=access)
    except CollectionNotFound as exc:
        raise not_found(name) from exc


@router.put(
    "/{name}",
    response_model=CollectionOut,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": CollectionOut, "description": "the collection was there already, with these settings"},
        409: {"model": ErrorResponse, "description": "a collection of that name with other settings, or an alias"},
        422: {"model": ErrorResponse},
        # No job is queued, but a new collection's files are written: refused as a first write is on a full disk.
        507: {"model": ErrorResponse, "description": "insufficient_storage: the disk is below VELA_MIN_FREE_DISK_MB"},
    },
)
def put_collection(name: str, state: State, response: Response, body: CollectionCreate | None = None) -> CollectionOut:
    """Create an empty collection with its embedder, shards and schema, before any document: as Qdrant's
    PUT /collections/{name} and Elasticsearch's PUT /{index} do. 201 when made; a collection of that name with the
    same settings is answered 200 as it is (a deployment script can run again), one with other settings is a 409,
    as a first POST /index naming them would be. Writes, aliases and schema changes then find it."""
    if not NAME_RE.fullmatch(name):
        raise ApiError(422, "invalid_request", f"collection name {shown(name)} must match {NAME_RE.pattern}")
    target = state.collections.aliases.target(name)
    if target is not None:
        raise ApiError(409, "conflict", f"{shown(name)} is an alias of {shown(target)}")
    body = body or CollectionCreate()
    with creation_errors():
        coll, made = create_collection(
            state=state,
            name=name,
            embedder=body.embedder,
            shards=body.shards,
            schema=body.schema_.model_dump() if body.schema_ is not None else None,
        )
    if not made:
        response.status_code = status.HTTP_200_OK
    return collection_out(state, coll, with_generations=True)


# Whether a collection (or an alias) exists, as Elasticsearch's HEAD /{index}: 200 or 404, without a body.
router.add_api_route("/{name}", get_collection, methods=["HEAD"], include_in_schema=False)


def _accepted(job: Job, request: Request) -> JobAccepted:
    return JobAccepted(job_id=job.id, status=job.status.value, url=str(request.url_for("get_job", job_id=job.id)))


SWITCH_ERRORS: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND,
    409: {"model": ErrorResponse, "description": "nothing to switch to, or a generation job of it is unfinished"},
}


@router.post(
    "/{name}/reindex",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses={**SWITCH_ERRORS, 422: {"model": ErrorResponse}},
)
def reindex_collection(name: str, body: ReindexRequest, state: State, request: Request) -> JobAccepted:
    """Build a new generation of the collection from its stored documents with another embedder (a registry
    name), while the current one keeps serving; writes made meanwhile reach both. When it is built (and passes
    its gate, if one is given) it is promoted atomically, or waits for POST /collections/{name}/promote with
    `"promote": "manual"`. Follow the job at GET /jobs/{id}: progress, ETA, cancel; its `result` has the gate's
    figures."""
    try:
        job = submit_reindex(state=state, collection=name, embedder=body.embedder, options=body.spec())
    except UnknownModelName as exc:
        raise ApiError(422, "unknown_model", str(exc)) from exc
    except (ModelKindMismatch, UnusableModel) as exc:
        raise ApiError(422, "invalid_model", str(exc)) from exc
    except UnknownDataset as exc:
        raise ApiError(422, "unknown_dataset", str(exc)) from exc
    except InvalidChunking as exc:
        raise ApiError(422, "invalid_request", str(exc)) from exc
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    except CollectionConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    return _accepted(job, request)


@router.post(
    "/{name}/promote", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted, responses=SWITCH_ERRORS
)
def promote_collection(name: str, state: State, request: Request) -> JobAccepted:
    """Switch searches to the generation a manual reindex finished (writes made since are caught up first).
    The one serving now is kept for POST /collections/{name}/rollback."""
    return _switch(name, state, request, JobKind.PROMOTE)


@router.post(
    "/{name}/rollback", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted, responses=SWITCH_ERRORS
)
def rollback_collection(name: str, state: State, request: Request) -> JobAccepted:
    """Switch searches back to the previous generation (kept until a promotion replaces it), after it catches up with
    the writes made since the promotion."""
    return _switch(name, state, request, JobKind.ROLLBACK)


def _switch(name: str, state: State, request: Request, kind: JobKind) -> JobAccepted:
    try:
        job = submit_switch(state=state, collection=name, kind=kind)
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    except (NothingToSwitch, CollectionConflict) as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    return _accepted(job, request)


@router.delete(
    "/{name}", status_code=status.HTTP_204_NO_CONTENT, responses={**NOT_FOUND, 409: {"model": ErrorResponse}}
)
def remove_collection(name: str, state: State) -> Response:
    """Delete a collection, its documents and indexes; its pending jobs are cancelled, and every alias of it goes
    with it. An alias is refused (409): a collection is deleted by its own name only, as Elasticsearch deletes no
    index through an alias, so that a client holding an alias as a stable handle cannot drop what it points at."""
    target = state.collections.aliases.target(name)
    if target is not None:
        raise ApiError(
            409,
            "conflict",
            f"{shown(name)} is an alias of {shown(target)}: delete a collection by its own name "
            f"(DELETE /collections/{target}), or the alias alone (DELETE /aliases/{name})",
        )
    try:
        delete_collection(state=state, name=name)
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# `:doc_id` (service/api/doc_id_path.py) so that any document id can be addressed, "/" and newlines included
# (percent-encode them, or not for "/"): ids are free-form strings at ingest, and every id that can be indexed
# must be deletable.
@router.delete(
    "/{name}/documents/{doc_id:doc_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses=NOT_FOUND,
)
def remove_document(name: str, doc_id: str, state: State, request: Request) -> JobAccepted:
    """Delete one document (through the job queue, like every write); follow the returned job."""
    try:
        job = submit_delete_many(state=state, collection=name, ids=[doc_id], raw_filter=None)
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    return JobAccepted(job_id=job.id, status=job.status.value, url=str(request.url_for("get_job", job_id=job.id)))
