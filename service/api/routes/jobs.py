from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from indexing.jobs import TERMINAL, Job, JobKind, JobNotFound, JobNotRetryable, JobStatus
from service.access import RequestAccess, reaches_job
from service.api.json_body import JsonRoute
from service.deps import State
from service.errors import ApiError, shown
from service.schemas import ErrorResponse, JobList, JobOut
from service.scroll_cursor import BadCursor, decode_cursor, encode_cursor

MAX_JOBS_PAGE = 1000

router = APIRouter(prefix="/jobs", tags=["jobs"], route_class=JsonRoute)
# A snapshot or restore job records its file and collection before it makes them (so that a run again after a
# crash makes the same ones): once it has failed or been cancelled, those were never made, and are not shown.
_UNMADE = ({JobKind.SNAPSHOT, JobKind.RESTORE}, {JobStatus.FAILED, JobStatus.CANCELLED})


def job_out(job: Job, worker: str | None = None) -> JobOut:
    return JobOut(
        id=job.id,
        collection=job.collection,
        kind=job.kind.value,
        status=job.status.value,
        done=job.done,
        total=job.total,
        docs_per_s=job.docs_per_s,
        eta_s=job.eta_s,
        error=job.error,
        worker=worker,
        attempts=job.attempts,
        cancel_requested=job.cancel_requested,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        result=None if job.kind in _UNMADE[0] and job.status in _UNMADE[1] else job.result,
    )


@router.get("", response_model=JobList, responses={422: {"model": ErrorResponse}})
def list_jobs(
    state: State,
    collection: Annotated[
        str | None, Query(max_length=1024, description="only this collection's jobs (an alias means its collection)")
    ] = None,
    status: Annotated[list[JobStatus] | None, Query(description="only jobs in these statuses (repeat it)")] = None,
    kind: Annotated[list[JobKind] | None, Query(description="only jobs of these kinds (repeat it)")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_JOBS_PAGE, description="most jobs in the page")] = 50,
    cursor: Annotated[
        str | None, Query(max_length=4096, description="next_cursor of the previous page; unset: the newest jobs")
    ] = None,
) -> JobList:
    """Jobs newest first, filtered by collection, status and kind: what is queued or running now, what failed. A
    page holds at most `limit` jobs; `next_cursor` reads on (null at the end); pages neither overlap nor skip while
    new jobs are added. Finished jobs are kept for VELA_JOBS_RETENTION_DAYS."""
    try:
        before = _position(decode_cursor(cursor)) if cursor else None
    except BadCursor as exc:
        raise ApiError(422, "invalid_cursor", str(exc)) from exc
    name = state.collections.resolve(collection) if collection is not None else None
    rows = state.jobs.listing(
        collection=name,
        statuses=frozenset(status or ()),
        kinds=frozenset(kind or ()),
        limit=limit + 1,  # one more than the page: whether there is a next one
        before=before,
    )
    page = rows[:limit]
    last = page[-1][0] if len(rows) > limit else None
    return JobList(
        jobs=[job_out(job, worker) for job, worker in page],
        next_cursor=None if last is None else encode_cursor(f"{last.created_at!r} {last.id}"),
    )


def _position(raw: str) -> tuple[float, str]:
    """(created_at, id) of the last job of a page, from its cursor."""
    created, _, job_id = raw.partition(" ")
    try:
        return float(created), job_id
    except ValueError as exc:
        raise BadCursor("cursor: not a cursor this API returned (pass next_cursor as it is)") from exc


@router.get("/{job_id}", response_model=JobOut, responses={404: {"model": ErrorResponse}})
def get_job(job_id: str, state: State, access: RequestAccess) -> JobOut:
    """Status (queued/running/succeeded/failed/cancelled), progress, speed and ETA of a job."""
    try:
        job = state.jobs.get(job_id)
    except JobNotFound as exc:
        raise ApiError(404, "job_not_found", f"no job with id {shown(job_id)}") from exc
    if not reaches_job(access, job.collection, state.collections.resolve):  # another tenant's job: not there
        raise ApiError(404, "job_not_found", f"no job with id {shown(job_id)}")
    if job.status == JobStatus.SUCCEEDED:
        # Read-your-writes: a worker process published the job's commit; this process loads it before it says
        # "succeeded", so a search right after sees the documents.
        state.collections.catch_up(job.collection)
    try:
        return job_out(job, state.jobs.worker(job_id))
    except JobNotFound as exc:
        raise ApiError(404, "job_not_found", f"no job with id {shown(job_id)}") from exc


@router.delete(
    "/{job_id}",
    response_model=JobOut,
    responses={
        404: {"model": ErrorResponse},
        409: {"model": ErrorResponse, "description": "the job has already ended: there is nothing to cancel"},
    },
)
def cancel_job(job_id: str, state: State) -> JobOut:
    """Cancel a job: a queued one at once, a running one at its next batch (work done so far stays). A job that
    has ended (succeeded, failed or cancelled) cannot be cancelled: 409."""
    try:
        job = state.jobs.get(job_id)
        if job.status in TERMINAL:
            raise ApiError(409, "conflict", f"job {job_id!r} has already ended ({job.status.value}): nothing to cancel")
        cancelled = state.jobs.request_cancel(job_id)
        return job_out(cancelled, state.jobs.worker(job_id))
    except JobNotFound as exc:
        raise ApiError(404, "job_not_found", f"no job with id {shown(job_id)}") from exc


@router.post(
    "/{job_id}/retry",
    status_code=202,
    response_model=JobOut,
    responses={
        404: {"model": ErrorResponse},
        409: {"model": ErrorResponse, "description": "the job did not fail: there is nothing to retry"},
    },
)
def retry_job(job_id: str, state: State) -> JobOut:
    """Run a failed job again (after a full disk or an I/O error, say): it is queued with the same documents.
    Jobs are idempotent, so what the failed run stored is not stored twice. Only a failed job: 409 otherwise."""
    try:
        job = state.jobs.requeue(job_id)
    except JobNotFound as exc:
        raise ApiError(404, "job_not_found", f"no job with id {shown(job_id)}") from exc
    except JobNotRetryable as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    state.queue.submit(job.id)
    return job_out(job)
