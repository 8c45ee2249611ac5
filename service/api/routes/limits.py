"""/limits: the per-request bounds this server enforces, so that a client can size its requests to fit them (the
Python client's `index_in_batches` reads it to choose its batch sizes) instead of learning them from a 413."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from indexing.filters import MAX_IDS
from indexing.shard_budget import MAX_SHARDS_PER_COLLECTION
from service.api.json_body import JsonRoute
from service.deps import State
from service.document_schemas import MAX_GET_IDS

router = APIRouter(tags=["limits"], route_class=JsonRoute)


class LimitsOut(BaseModel):
    max_json_bytes: int = Field(
        ...,
        description="largest JSON request body, in bytes (every route but the snapshot upload; the lower of "
        "VELA_MAX_JSON_BYTES and VELA_MAX_REQUEST_BYTES)",
    )
    max_request_bytes: int = Field(..., description="largest snapshot upload, in bytes (VELA_MAX_REQUEST_BYTES)")
    max_batch_documents: int = Field(
        ..., description="most documents in one POST /index, or ids in one delete (VELA_MAX_BATCH_DOCUMENTS)"
    )
    max_document_bytes: int = Field(..., description="largest document text, in UTF-8 bytes (VELA_MAX_DOCUMENT_BYTES)")
    max_metadata_bytes: int = Field(
        ..., description="largest metadata of one document, as compact JSON (VELA_MAX_METADATA_BYTES)"
    )
    max_metadata_keys: int = Field(..., description="most keys in one document's metadata (VELA_MAX_METADATA_KEYS)")
    max_metadata_values: int = Field(
        ...,
        description="most values in one document's metadata, each element of a list counting "
        "(VELA_MAX_METADATA_VALUES)",
    )
    max_metadata_depth: int = Field(..., description="deepest nesting of a document's metadata")
    max_batch_queries: int = Field(..., description="most queries in one POST /search/batch (VELA_MAX_BATCH_QUERIES)")
    max_query_chars: int = Field(..., description="characters of all the queries of one request")
    max_search_hits: int = Field(..., description="(k + offset) x queries of one search request")
    max_highlight_hits: int = Field(
        ..., description="(k + offset) x queries of one search request with highlight (VELA_MAX_HIGHLIGHT_HITS)"
    )
    max_search_depth: int = Field(..., description="depth x queries of one search request")
    max_response_bytes: int = Field(..., description="largest response body, in bytes (VELA_MAX_RESPONSE_BYTES)")
    max_shards_per_collection: int = Field(..., description="most shards of a new collection (POST /index shards)")
    max_shards: int = Field(
        ...,
        description="most shards of all collections together (VELA_MAX_SHARDS, or lower where the open-files limit "
        "holds fewer); a new collection past it is a 409 limit_exceeded",
    )
    shards: int = Field(..., description="shards the collections hold now (a one-shard collection counts one)")
    max_aliases: int = Field(
        ..., description="most aliases of the server; a new one past it is a 409 (VELA_MAX_ALIASES)"
    )
    max_filter_ids: int = Field(..., description="most ids in all the has_id conditions of one filter")
    max_get_documents: int = Field(..., description="most ids in one read of many documents by id")


@router.get("/limits", response_model=LimitsOut)
def get_limits(state: State) -> LimitsOut:
    """The bounds a request must keep within (each a `VELA_*` setting); past one, the answer is 413 or 422 (409 for
    a new collection past the shard cap)."""
    s = state.settings
    cap = state.collections.shard_cap
    return LimitsOut(
        max_json_bytes=min(s.max_json_bytes, s.max_request_bytes),  # what limit_body enforces on a JSON body
        max_request_bytes=s.max_request_bytes,
        max_batch_documents=s.max_batch_documents,
        max_document_bytes=s.max_document_bytes,
        max_metadata_bytes=s.max_metadata_bytes,
        max_metadata_keys=s.max_metadata_keys,
        max_metadata_values=s.max_metadata_values,
        max_metadata_depth=s.max_metadata_depth,
        max_batch_queries=s.max_batch_queries,
        max_query_chars=s.max_query_chars,
        max_search_hits=s.max_search_hits,
        max_highlight_hits=s.max_highlight_hits,
        max_search_depth=s.max_search_depth,
        max_response_bytes=s.max_response_bytes,
        max_shards_per_collection=MAX_SHARDS_PER_COLLECTION,
        max_shards=cap.limit if cap is not None else s.max_shards,
        shards=state.collections.shards_held(),
        max_aliases=s.max_aliases,
        max_filter_ids=MAX_IDS,
        max_get_documents=MAX_GET_IDS,
    )
