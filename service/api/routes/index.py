from __future__ import annotations

from fastapi import APIRouter, Request, status

from indexing.collection import CollectionConflict
from indexing.shard_budget import ShardLimitExceeded
from service.api.json_body import JsonRoute
from service.deps import State
from service.documents import BatchTooLarge, DocumentTooLarge, InvalidMetadata, UnsupportedSharding, submit_upsert
from service.errors import ApiError
from service.limits import check_metadata
from service.model_registry import ModelKindMismatch, UnknownModelName, UnusableModel
from service.schemas import ErrorResponse, IndexRequest, JobAccepted

router = APIRouter(tags=["index"], route_class=JsonRoute)


@router.post(
    "/index",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses={413: {"model": ErrorResponse}, 409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)
def index_documents(body: IndexRequest, state: State, request: Request) -> JobAccepted:
    """Upsert documents by id. Returns at once with a job to follow at `GET /jobs/{id}`."""
    check_metadata(body.documents, state.settings)  # before model_dump: it cannot serialise very deep data
    try:
        job = submit_upsert(
            state=state,
            collection=state.collections.resolve(body.collection),  # an alias: the job records its collection
            documents=[d.model_dump() for d in body.documents],
            embedder=body.embedder,
            shards=body.shards,
            schema=body.schema_.model_dump() if body.schema_ is not None else None,
        )
    except UnsupportedSharding as exc:
        raise ApiError(422, "invalid_request", str(exc)) from exc
    except InvalidMetadata as exc:
        raise ApiError(422, "invalid_metadata", str(exc)) from exc
    except (DocumentTooLarge, BatchTooLarge) as exc:
        raise ApiError(413, "payload_too_large", str(exc)) from exc
    except CollectionConflict as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    except ShardLimitExceeded as exc:  # the data directory holds all the shards it may: nothing was created
        raise ApiError(409, "limit_exceeded", str(exc)) from exc
    except UnknownModelName as exc:
        raise ApiError(422, "unknown_model", str(exc)) from exc
    except (ModelKindMismatch, UnusableModel) as exc:
        raise ApiError(422, "invalid_model", str(exc)) from exc
    return JobAccepted(job_id=job.id, status=job.status.value, url=str(request.url_for("get_job", job_id=job.id)))
