"""Typed client for the Vela retrieval API: `VelaClient` (blocking) and `AsyncVelaClient` (asyncio or trio).

    from vela_client import VelaClient

    with VelaClient("http://127.0.0.1:8000", api_key="...") as vela:
        vela.index("docs", [{"id": "a", "text": "..."}], wait=True)
        vela.index_in_batches("docs", read_corpus(), wait=True)  # any iterable, in requests that fit the server
        hits = vela.search("docs", "a question", k=5).hits

Imports only httpx, pydantic and anyio: no model or index code comes with it.
"""

from vela_client.async_client import AsyncVelaClient
from vela_client.bulk import IndexProgress
from vela_client.calls import DocumentLike
from vela_client.errors import (
    ChecksumMismatch,
    ClientClosed,
    Conflict,
    ConnectionFailed,
    Forbidden,
    InsufficientStorage,
    InvalidRequest,
    InvalidSnapshot,
    JobFailed,
    JobWaitTimeout,
    NotFound,
    PayloadTooLarge,
    ServerError,
    SnapshotNotFound,
    Timeout,
    Unauthorized,
    Unavailable,
    VelaError,
)
from vela_client.models import (
    Alias,
    BatchSearchResponse,
    Collection,
    Count,
    Document,
    DocumentPage,
    Documents,
    Facet,
    FacetHit,
    Fusion,
    Health,
    Hit,
    Job,
    JobAccepted,
    JobPage,
    Limits,
    Model,
    ModelEval,
    PassageRef,
    Ranks,
    Readiness,
    Rerank,
    RerankInfo,
    SearchResponse,
    Snapshot,
    StoredDocument,
)
from vela_client.retry import NO_RETRY, RetryPolicy
from vela_client.search_calls import SearchOptions
from vela_client.sync_client import VelaClient
from vela_client.version import __version__

__all__ = [
    "NO_RETRY",
    "Alias",
    "AsyncVelaClient",
    "BatchSearchResponse",
    "ChecksumMismatch",
    "ClientClosed",
    "Collection",
    "Conflict",
    "ConnectionFailed",
    "Count",
    "Facet",
    "FacetHit",
    "Document",
    "DocumentLike",
    "DocumentPage",
    "Documents",
    "Fusion",
    "Health",
    "Hit",
    "IndexProgress",
    "InsufficientStorage",
    "InvalidRequest",
    "InvalidSnapshot",
    "Job",
    "JobAccepted",
    "JobFailed",
    "JobPage",
    "JobWaitTimeout",
    "Limits",
    "Model",
    "ModelEval",
    "NotFound",
    "PassageRef",
    "PayloadTooLarge",
    "Ranks",
    "Readiness",
    "Rerank",
    "RerankInfo",
    "RetryPolicy",
    "SearchOptions",
    "SearchResponse",
    "ServerError",
    "Snapshot",
    "SnapshotNotFound",
    "StoredDocument",
    "Timeout",
    "Forbidden",
    "Unauthorized",
    "Unavailable",
    "VelaClient",
    "VelaError",
    "__version__",
]
