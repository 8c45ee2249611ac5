"""The document API: GET one document, scroll a collection's documents, PATCH metadata, delete many, count, declare
fields."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response, status

import service.api.doc_id_path  # noqa: F401  registers {doc_id:doc_id} before the routes below
from indexing.collection import Collection, CollectionNotFound
from indexing.docstore import DocumentRecord
from indexing.docstore_order import OrderNotReady
from indexing.facets import FacetError
from indexing.filter_match import matches
from indexing.filters import FilterError
from indexing.metadata_paths import MAX_PATH
from service.access import RequestAccess, cursor_seal, pinned_filter, read_filter, visible_only
from service.api.json_body import JsonRoute
from service.api.routes.collections import not_found
from service.deps import State
from service.document_api import (
    DocumentNotFound,
    MetadataOutOfBounds,
    count,
    facet,
    get_document,
    get_documents,
    scroll,
    submit_delete_many,
    submit_patch,
    submit_schema,
)
from service.document_schemas import (
    MAX_SCROLL_LIMIT,
    CountRequest,
    CountResponse,
    DeleteDocumentsRequest,
    DocumentOut,
    FacetHit,
    FacetRequest,
    FacetResponse,
    GetDocumentsRequest,
    GetDocumentsResponse,
    PassageSpan,
    PatchRequest,
    ScrollResponse,
    StoredDocumentOut,
)
from service.documents import BatchTooLarge, InvalidMetadata
from service.errors import ApiError, shown
from service.limits import check_response_size, document_size, get_documents_size
from service.schemas import ErrorResponse, JobAccepted, SchemaUpdate
from service.scroll_cursor import BadCursor, scroll_cursor, scroll_position
from service.scroll_params import query_filter, scroll_ordering
from service.state import AppState

router = APIRouter(prefix="/collections", tags=["documents"], route_class=JsonRoute)
ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}, 422: {"model": ErrorResponse}}
MAX_FILTER_CHARS = 65_536  # the filter query parameter, as JSON text
# A cursor: an ordered scroll's names its field, a keyword value (ORDER_KEY_CHARS) and an id, JSON-escaped; a
# scoped token's is sealed, padded and base64'd again (service/access.py), about 4/3 of that.
MAX_CURSOR_CHARS = 24_576


def _collection(state: AppState, name: str) -> Collection:
    try:
        return state.collections.get(name)
    except CollectionNotFound as exc:
        raise not_found(name) from exc


def _document_not_found(name: str, doc_id: str) -> ApiError:
    return ApiError(404, "document_not_found", f"no document {shown(doc_id)} in collection {shown(name)}")


def _accepted(request: Request, job_id: str, job_status: str) -> JobAccepted:
    return JobAccepted(job_id=job_id, status=job_status, url=str(request.url_for("get_job", job_id=job_id)))


def _stored(doc: DocumentRecord) -> StoredDocumentOut:
    return StoredDocumentOut(id=doc.doc_id, title=doc.title, text=doc.text, metadata=doc.metadata)


def _bounded(state: AppState, body: bytes, *, advice: str) -> Response:
    """The serialised body, refused (413) past VELA_MAX_RESPONSE_BYTES, counted in bytes as sent. A backstop: the
    size measured before the body was built has refused it already."""
    check_response_size(state.settings, len(body), advice=advice)
    return Response(body, media_type="application/json")


@router.get(
    "/{name}/documents",
    response_model=ScrollResponse,
    responses={
        **ERRORS,
        409: {"model": ErrorResponse, "description": "order_by: a field whose schema is being changed"},
        413: {"model": ErrorResponse, "description": "a document larger than the response limit"},
    },
)
def scroll_documents(
    name: str,
    state: State,
    access: RequestAccess,
    filter_: Annotated[
        str | None,
        Query(
            alias="filter",
            max_length=MAX_FILTER_CHARS,
            description="a metadata filter as JSON text (the Filter schema), matched on each document's latest "
            "stored metadata",
        ),
    ] = None,
    cursor: Annotated[
        str | None,
        Query(max_length=MAX_CURSOR_CHARS, description="next_cursor of the previous page; unset: from the start"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_SCROLL_LIMIT, description="most documents in the page")] = 100,
    order_by: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_PATH,
            description="a declared metadata field to order by (a nested one by its dotted path); unset: id order",
        ),
    ] = None,
    direction: Annotated[
        Literal["asc", "desc"] | None, Query(description="with order_by: ascending (the default) or descending")
    ] = None,
) -> Response:
    """Scroll the collection's documents in id order, or ordered by a declared field (`order_by`, `direction`:
    ties, then the documents without a value, in id order), filtered by metadata. A scroll visits each document
    present at its start (and not deleted) exactly once; in an ordered one, a document whose value changes
    meanwhile may move. Each request scans a bounded number of documents: a page may hold fewer than `limit`
    (even none) and still have a `next_cursor`; the scroll ends when `next_cursor` is null."""
    coll = _collection(state, name)
    node = query_filter(filter_, coll, access, name)
    ordering = scroll_ordering(coll, order_by, direction)
    seal, unseal = cursor_seal(access, name, coll.settings.schema)
    try:
        after = scroll_position(unseal(cursor), ordering) if cursor else None
    except BadCursor as exc:
        raise ApiError(422, "invalid_cursor", str(exc)) from exc
    try:
        page = scroll(state=state, coll=coll, node=node, after=after, limit=limit, ordering=ordering, seal=seal)
    except OrderNotReady as exc:
        raise ApiError(409, "conflict", f"{exc} (its schema is being changed): try again shortly") from exc
    # Only a page whose one document is too large is over the limit: refused before its body is built.
    first = page.documents[0].doc_id if page.documents else ""
    advice = f"the next document, {shown(first)}, alone is larger: raise the limit to read it"
    check_response_size(state.settings, page.size, advice=advice)
    response = ScrollResponse(
        documents=[_stored(d) for d in page.documents],
        next_cursor=seal(scroll_cursor(page.next_after, ordering)) if page.next_after is not None else None,
    )
    return _bounded(state, response.__pydantic_serializer__.to_json(response), advice=advice)


# `:path`, as for DELETE: any document id can be addressed, "/" included.
@router.get(
    "/{name}/documents/{doc_id:doc_id}",
    response_model=DocumentOut,
    responses={**ERRORS, 413: {"model": ErrorResponse, "description": "a document larger than the response limit"}},
)
def read_document(name: str, doc_id: str, state: State, access: RequestAccess) -> Response:
    """One document exactly as stored: title, text, metadata, and its passages (ids and character offsets)."""
    # A scoped token's pin first: one the schema no longer takes is a 403 for every id, stored or not.
    schema = _collection(state, name).settings.schema if access.grant is not None else {}
    pin = pinned_filter(access, name, schema)
    try:
        doc = get_document(state=state, collection=name, doc_id=doc_id)
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    except DocumentNotFound as exc:
        raise _document_not_found(name, doc_id) from exc
    if pin is not None and not matches(pin, doc.metadata, doc.doc_id):
        raise _document_not_found(name, doc_id)  # outside the token's filter: as if it were not there
    # The stored text is bounded at ingest, but by a setting that may have been lowered since, and its metadata
    # and passages add to it: measured before the body is built.
    advice = f"document {shown(doc.doc_id)} is larger with its metadata and passages: raise the limit to read it"
    check_response_size(state.settings, document_size(doc, passages=True), advice=advice)
    out = _full(doc)
    return _bounded(state, out.__pydantic_serializer__.to_json(out), advice=advice)


@router.post(
    "/{name}/documents",
    response_model=GetDocumentsResponse,
    responses={
        **ERRORS,
        413: {"model": ErrorResponse, "description": "the documents are larger than the response limit"},
    },
)
def read_documents(name: str, body: GetDocumentsRequest, state: State, access: RequestAccess) -> Response:
    """Many documents by id in one request, as Qdrant's retrieve and Elasticsearch's mget: those found, in the
    order asked, and the ids of none. Their passages too with `"passages": true`."""
    coll = _collection(state, name)
    docs, missing = get_documents(coll=coll, ids=body.ids, passages=body.passages)
    if access.grant is not None:  # those outside a scoped token's filter are reported as not found
        docs, missing = visible_only(access, name, coll.settings.schema, docs, asked=body.ids)
    advice = "ask for fewer documents at a time, or raise the limit"
    size = get_documents_size([document_size(d, passages=body.passages) for d in docs], missing)
    check_response_size(state.settings, size, advice=advice)
    out = GetDocumentsResponse(documents=[_full(d) if body.passages else _stored(d) for d in docs], not_found=missing)
    return _bounded(state, out.__pydantic_serializer__.to_json(out), advice=advice)


def _full(doc: DocumentRecord) -> DocumentOut:
    spans = [PassageSpan(id=p, index=i, start=a, end=b) for p, i, a, b in doc.passages or []]
    return DocumentOut(id=doc.doc_id, title=doc.title, text=doc.text, metadata=doc.metadata, passages=spans)


# Whether a document exists, as Elasticsearch's HEAD /{index}/_doc/{id}: 200 or 404, without a body.
router.add_api_route("/{name}/documents/{doc_id:doc_id}", read_document, methods=["HEAD"], include_in_schema=False)


@router.patch(
    "/{name}/documents/{doc_id:doc_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses=ERRORS,
)
def patch_document(name: str, doc_id: str, body: PatchRequest, state: State, request: Request) -> JobAccepted:
    """Change a document's metadata without re-embedding it (a job, like every write). Reads (GET, scroll) see
    the new metadata once the job has succeeded, and so do searches and counts: the job ends with a commit."""
    try:
        job = submit_patch(
            state=state, collection=name, doc_id=doc_id, metadata=body.metadata, mode=body.mode, unset=body.unset
        )
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    except DocumentNotFound as exc:
        raise _document_not_found(name, doc_id) from exc
    except InvalidMetadata as exc:
        raise ApiError(422, "invalid_metadata", str(exc)) from exc
    except MetadataOutOfBounds as exc:
        raise ApiError(422, "invalid_request", str(exc)) from exc
    return _accepted(request, job.id, job.status.value)


@router.post(
    "/{name}/delete",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses={**ERRORS, 413: {"model": ErrorResponse}},
)
def delete_documents(name: str, body: DeleteDocumentsRequest, state: State, request: Request) -> JobAccepted:
    """Delete many documents through one job: by `ids`, or every document whose stored metadata passes `filter`
    when the job runs (what a scroll with that filter would visit). The job's `result.deleted` says how many
    were there; searches stop finding them once it has succeeded."""
    try:
        job = submit_delete_many(state=state, collection=name, ids=body.ids, raw_filter=body.filter)
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    except FilterError as exc:
        raise ApiError(422, "invalid_filter", str(exc)) from exc
    except BatchTooLarge as exc:
        raise ApiError(413, "payload_too_large", str(exc)) from exc
    return _accepted(request, job.id, job.status.value)


@router.post("/{name}/count", response_model=CountResponse, responses=ERRORS)
def count_documents(name: str, state: State, access: RequestAccess, body: CountRequest | None = None) -> CountResponse:
    """Documents with a live passage that passes the filter, in the searchable (committed) index: what searches
    see, so writes count once their job has succeeded. No body counts every document."""
    coll = _collection(state, name)
    node = read_filter(access, name, body.filter if body is not None else None, coll.settings.schema)
    return CountResponse(count=count(state=state, coll=coll, node=node))


@router.post("/{name}/facet", response_model=FacetResponse, responses=ERRORS)
def facet_values(name: str, body: FacetRequest, state: State, access: RequestAccess) -> FacetResponse:
    """The values of a declared keyword, integer or boolean field held by the most documents that pass the
    filter, each with its number of documents, in the searchable (committed) index, as counts see it."""
    coll = _collection(state, name)
    node = read_filter(access, name, body.filter, coll.settings.schema)
    try:
        hits, distinct = facet(state=state, coll=coll, key=body.key, node=node, limit=body.limit)
    except FacetError as exc:
        raise ApiError(422, "invalid_facet", str(exc)) from exc
    return FacetResponse(
        key=body.key, hits=[FacetHit(value=h.value, count=h.count) for h in hits], distinct_values=distinct
    )


@router.put(
    "/{name}/schema",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses=ERRORS,
)
def declare_schema(name: str, body: SchemaUpdate, state: State, request: Request) -> JobAccepted:
    """Declare the collection's metadata fields (and strictness) through a job: it checks every stored value of
    the fields being declared and fails, changing nothing, naming documents whose values do not fit; else filters
    on those fields use typed indexes once it has succeeded."""
    try:
        job = submit_schema(state=state, collection=name, schema=body.model_dump())
    except CollectionNotFound as exc:
        raise not_found(name) from exc
    return _accepted(request, job.id, job.status.value)
