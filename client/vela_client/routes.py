"""The API's routes, one constant each, and `Call`: one prepared request plus how to read its answer.

Adding a route to the client takes three small steps, the same for every route:
1. a `Route` constant here (and in `ROUTES`);
2. a function in `vela_client.calls` that turns typed arguments into a `Call`;
3. a one-line method in `VelaClient` and in `AsyncVelaClient` that sends that `Call` (in the client module, or in the
   mixin for its resource: sync_documents.py / async_documents.py, sync_collections.py / async_collections.py,
   sync_snapshots.py / async_snapshots.py, whose calls are in `vela_client.snapshot_calls`; the stored-documents
   calls are in `vela_client.document_calls`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from vela_client import encoding
from vela_client.transfers import DownloadTarget

T = TypeVar("T")


@dataclass(frozen=True)
class Route:
    """One operation of the API.

    `path` is its OpenAPI template ("/jobs/{job_id}"). `idempotent`: sending it twice gives the same state and the
    same answer, so it is sent again after a connection broke mid-request. `retry`: retried at all (a readiness
    probe answers now)."""

    method: str
    path: str
    idempotent: bool = True
    retry: bool = True

    def call(
        self,
        parse: Callable[[httpx.Response], T],
        *,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, Any] | None = None,
        upload: Path | None = None,
        headers: Mapping[str, str] | None = None,
        download: DownloadTarget | None = None,
        final_codes: frozenset[str] = frozenset(),
        **path_params: str,
    ) -> Call[T]:
        for name, value in path_params.items():
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string, not {value!r}")
        path = self.path.format(**{k: path_segment(v) for k, v in path_params.items()})
        params_sent = dict(params) if params else None
        sent_headers = dict(headers) if headers else None
        if json is not None:  # encoded here, once: a value JSON has no form for fails before any request is made
            content = encoding.encode(json)
            sent_headers = {**(sent_headers or {}), "Content-Type": "application/json"}
        return Call(self, path, parse, params_sent, upload, sent_headers, download, content, final_codes)


def path_segment(value: str) -> str:
    """One path parameter as one segment, fully percent-encoded: a document id may hold "/", "?" or "#". An id
    that is "." or ".." has its dots encoded too: left as they are, the URL would be resolved as a path (RFC 3986
    dot segments), and `DELETE /collections/c/documents/..` would be sent as `DELETE /collections/c`."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if value in (".", "..") else quoted


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request. `upload`: a file sent as the body, in chunks (read again from its start on each try).
    `download`: where a successful answer's body is written as it comes, instead of being read into memory
    (`parse` then sees the response without its body). `content`: the body, encoded (`Route.call` encodes a
    `json` value with `vela_client.encoding`; a batch of documents, encoded once to measure it, is sent as those
    very bytes). `final_codes`: codes of a 503 that end the call at once instead of being retried (a bulk index
    that meets `queue_full` waits for a job of its own to end, not for `Retry-After`)."""

    route: Route
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    upload: Path | None = None
    headers: dict[str, str] | None = None
    download: DownloadTarget | None = None
    content: bytes | None = None
    final_codes: frozenset[str] = frozenset()


HEALTHZ = Route("GET", "/healthz")
READYZ = Route("GET", "/readyz", retry=False)
METRICS = Route("GET", "/metrics")
LIST_COLLECTIONS = Route("GET", "/collections")
GET_COLLECTION = Route("GET", "/collections/{name}")
# Sent twice, the second answer is a 200 with the collection the first made: the same state.
CREATE_COLLECTION = Route("PUT", "/collections/{name}")
# HEAD: whether it exists (200 or 404, no body). The server keeps HEAD routes out of its OpenAPI schema.
COLLECTION_EXISTS = Route("HEAD", "/collections/{name}")
# Sent twice after a connection broke, the second answer would be a 404 although the first one worked.
DELETE_COLLECTION = Route("DELETE", "/collections/{name}", idempotent=False)
DELETE_DOCUMENT = Route("DELETE", "/collections/{name}/documents/{doc_id}")
GET_DOCUMENT = Route("GET", "/collections/{name}/documents/{doc_id}")
DOCUMENT_EXISTS = Route("HEAD", "/collections/{name}/documents/{doc_id}")
SCROLL_DOCUMENTS = Route("GET", "/collections/{name}/documents")
GET_DOCUMENTS = Route("POST", "/collections/{name}/documents")  # a read: sent again, the same answer
# A merge or replace of the same metadata: sent twice, two jobs leave the same metadata.
PATCH_DOCUMENT = Route("PATCH", "/collections/{name}/documents/{doc_id}")
# Sent twice, the second job finds those documents already gone (it deletes 0): the same documents are left.
DELETE_DOCUMENTS = Route("POST", "/collections/{name}/delete")
COUNT = Route("POST", "/collections/{name}/count")
FACET = Route("POST", "/collections/{name}/facet")
SET_SCHEMA = Route("PUT", "/collections/{name}/schema")
# Each starts a job; sent twice, the second reindex is refused (409) and a second switch undoes the first.
REINDEX = Route("POST", "/collections/{name}/reindex", idempotent=False)
PROMOTE = Route("POST", "/collections/{name}/promote", idempotent=False)
ROLLBACK = Route("POST", "/collections/{name}/rollback", idempotent=False)
# An upsert by document id: sending it twice queues two jobs that leave the same documents.
INDEX = Route("POST", "/index")
SEARCH = Route("POST", "/search")
SEARCH_BATCH = Route("POST", "/search/batch")
RECOMMEND = Route("POST", "/recommend")
GET_JOB = Route("GET", "/jobs/{job_id}")
LIST_JOBS = Route("GET", "/jobs")
LIST_MODELS = Route("GET", "/models")
LIMITS = Route("GET", "/limits")
LIST_ALIASES = Route("GET", "/aliases")
GET_ALIAS = Route("GET", "/aliases/{alias}")
# Pointing an alias at a collection twice leaves the same alias: safe to send again.
PUT_ALIAS = Route("PUT", "/aliases/{alias}")
# 404 the second time, although the first one worked.
DELETE_ALIAS = Route("DELETE", "/aliases/{alias}", idempotent=False)
# Likewise 409 the second time (the job has ended, or is no longer failed), so neither is sent again blindly.
CANCEL_JOB = Route("DELETE", "/jobs/{job_id}", idempotent=False)
RETRY_JOB = Route("POST", "/jobs/{job_id}/retry", idempotent=False)
# Sent twice, two snapshots would be taken.
CREATE_SNAPSHOT = Route("POST", "/collections/{name}/snapshots", idempotent=False)
LIST_SNAPSHOTS = Route("GET", "/collections/{name}/snapshots")
# A download that broke is started over from its first byte.
DOWNLOAD_SNAPSHOT = Route("GET", "/collections/{name}/snapshots/{snapshot}")
# 404 the second time, although the first one worked.
DELETE_SNAPSHOT = Route("DELETE", "/collections/{name}/snapshots/{snapshot}", idempotent=False)
# Sent again, a restore (the same snapshot into the same name) gets the job the first one made back.
RESTORE_SNAPSHOT = Route("POST", "/collections/{name}/snapshots/{snapshot}/restore")
# Likewise an upload, which this client always sends with its sha256 (the server compares by it).
UPLOAD_SNAPSHOT = Route("POST", "/snapshots/upload")

# The operations the API's OpenAPI schema publishes (tests/client/test_routes_coverage.py compares them).
ROUTES: tuple[Route, ...] = (
    HEALTHZ,
    READYZ,
    METRICS,
    LIST_COLLECTIONS,
    GET_COLLECTION,
    CREATE_COLLECTION,
    DELETE_COLLECTION,
    DELETE_DOCUMENT,
    GET_DOCUMENT,
    GET_DOCUMENTS,
    SCROLL_DOCUMENTS,
    PATCH_DOCUMENT,
    DELETE_DOCUMENTS,
    COUNT,
    FACET,
    SET_SCHEMA,
    REINDEX,
    PROMOTE,
    ROLLBACK,
    INDEX,
    SEARCH,
    SEARCH_BATCH,
    RECOMMEND,
    GET_JOB,
    LIST_JOBS,
    CANCEL_JOB,
    RETRY_JOB,
    LIST_MODELS,
    LIMITS,
    LIST_ALIASES,
    GET_ALIAS,
    PUT_ALIAS,
    DELETE_ALIAS,
    CREATE_SNAPSHOT,
    LIST_SNAPSHOTS,
    DOWNLOAD_SNAPSHOT,
    DELETE_SNAPSHOT,
    RESTORE_SNAPSHOT,
    UPLOAD_SNAPSHOT,
)

# Answered by the server beside a GET of the same path, but not in its schema.
HEAD_ROUTES: tuple[Route, ...] = (COLLECTION_EXISTS, DOCUMENT_EXISTS)
