from __future__ import annotations

from fastapi import APIRouter, Request, status

from service.access import RequestAccess, require
from service.api.creation_errors import creation_errors
from service.api.json_body import JsonRoute
from service.deps import State
from service.documents import BatchTooLarge, DocumentTooLarge, InvalidMetadata, submit_upsert
from service.errors import ApiError, shown
from service.limits import check_metadata
from service.schemas import ErrorResponse, IndexRequest, JobAccepted

router = APIRouter(tags=["index"], route_class=JsonRoute)


@router.post(
    "/index",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses={413: {"model": ErrorResponse}, 409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)
def index_documents(body: IndexRequest, state: State, request: Request, access: RequestAccess) -> JobAccepted:
    """Upsert documents by id. Returns at once with a job to follow at `GET /jobs/{id}`."""
    require(access, body.collection, write=True)
    if access.grant is not None and not state.collections.exists(body.collection):
        # A token writes documents; making a collection (its shards, embedder, schema) is an operator's: a key.
        raise ApiError(403, "forbidden", f"no collection named {shown(body.collection)}: creating one needs a key")
    check_metadata(body.documents, state.settings)  # before model_dump: it cannot serialise very deep data
    try:
        with creation_errors():
            job = submit_upsert(
                state=state,
                collection=state.collections.resolve(body.collection),  # an alias: the job records its collection
                documents=[d.model_dump() for d in body.documents],
                embedder=body.embedder,
                shards=body.shards,
                schema=body.schema_.model_dump() if body.schema_ is not None else None,
            )
    except InvalidMetadata as exc:
        raise ApiError(422, "invalid_metadata", str(exc)) from exc
    except (DocumentTooLarge, BatchTooLarge) as exc:
        raise ApiError(413, "payload_too_large", str(exc)) from exc
    return JobAccepted(job_id=job.id, status=job.status.value, url=str(request.url_for("get_job", job_id=job.id)))
