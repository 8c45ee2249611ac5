"""Typed bodies of the Vela API, as the client sees them.

Responses keep fields a newer server adds (`model_extra`) instead of failing on them, and status-like fields are
plain strings, so that an older client still reads a newer server. Request models only shape what is sent: the
server validates it (and answers 422 with the reasons).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["dense", "bm25", "hybrid"]
Dim = Literal["full", "256"]
# How a hybrid search fuses its lists, and how convex fusion normalises each list's scores (the server's values).
FusionMethod = Literal["auto", "rrf", "convex", "dense", "bm25"]
Normalization = Literal["minmax", "zscore", "dbsf"]

# Job statuses after which a job changes no more.
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Health(_Response):
    status: str


class Readiness(_Response):
    """`GET /readyz`: counts and states, no paths."""

    status: str
    collections: int
    embedders: int
    queue: str | None = Field(
        None,
        description="ok; unreachable while the Redis job queue does not answer (writes get 503 queue_unavailable, "
        "searches go on); job_store_moved when the job store's file was removed or replaced under the running "
        "process (writes get 503 until it restarts). None from a server too old to say",
    )


class Job(_Response):
    """A background job (an ingest, a delete, a reindex, a snapshot or a restore...): status, progress, speed and
    ETA."""

    id: str
    collection: str
    kind: str
    status: str = Field(description="queued, running, succeeded, failed or cancelled")
    done: int
    total: int
    docs_per_s: float | None = None
    eta_s: float | None = None
    error: str | None = None
    worker: str | None = None
    attempts: int = 0
    cancel_requested: bool = False  # a running job stops at its next batch; one in its last finishes
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    result: dict[str, Any] | None = None  # a reindex's generation and gate figures, a snapshot's name and sha256

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


class JobPage(_Response):
    """One page of jobs, newest first; `next_cursor` None at the end."""

    jobs: list[Job]
    next_cursor: str | None = None


class JobAccepted(_Response):
    """The answer to a write: the job that will do it."""

    job_id: str
    status: str
    url: str


class Collection(_Response):
    name: str
    documents: int
    passages: int
    embedder: str
    dims: dict[str, int]
    index: dict[str, Any]
    chunking: dict[str, int]
    created_at: float
    shards: int = 1
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")  # declared metadata fields, strictness
    fusion: dict[str, Any] = Field(default_factory=dict)  # how hybrid searches fuse by default, and how chosen
    generations: dict[str, Any] | None = None  # current, previous (kept for rollback) and building
    aliases: list[str] = Field(default_factory=list)  # the aliases that point at it, sorted


class CollectionList(_Response):
    collections: list[Collection]


class PassageRef(_Response):
    id: int
    index: int
    start: int
    end: int


class StoredDocument(_Response):
    """A document as the collection stores it: `passages` (ids and character offsets) from `get_document`, None
    in a scroll page."""

    id: str
    title: str
    text: str
    metadata: dict[str, Any]
    passages: list[PassageRef] | None = None


class Documents(_Response):
    """Documents read by id: those found, in the order asked (with passages when asked for), and the ids of none."""

    documents: list[StoredDocument]
    not_found: list[str]


class DocumentPage(_Response):
    """One page of a scroll: documents in id order; `next_cursor` None once the scroll is over. A page may hold
    fewer documents than asked for (even none) and still have a next_cursor."""

    documents: list[StoredDocument]
    next_cursor: str | None = None


class Count(_Response):
    count: int


class FacetHit(_Response):
    value: bool | int | str
    count: int


class Facet(_Response):
    """The most frequent values of a field among the documents that pass a filter."""

    key: str
    hits: list[FacetHit]
    distinct_values: int


class ModelEval(_Response):
    name: str
    result: dict[str, Any]


class Model(_Response):
    """A model requests may name (`embedder` of `index`, `Rerank.model`): the built-in `default` or a registered one."""

    name: str
    kind: str = Field(description="embedder or reranker")
    dims: int | None = None
    created_at: float | None = None
    builtin: bool = False
    aliases: list[str] = []
    training: dict[str, Any] | None = None
    evals: list[ModelEval] = []


class ModelList(_Response):
    models: list[Model]


class Limits(_Response):
    """The per-request bounds a server enforces (each a `VELA_*` setting of it): `index_in_batches` sizes its
    requests by `max_json_bytes`, `max_batch_documents` and `max_document_bytes`."""

    max_json_bytes: int
    max_request_bytes: int
    max_batch_documents: int
    max_document_bytes: int
    max_metadata_bytes: int
    max_metadata_keys: int
    max_metadata_values: int | None = None  # None from a server older than this limit
    max_metadata_depth: int
    max_batch_queries: int
    max_query_chars: int
    max_search_hits: int
    max_search_depth: int
    max_response_bytes: int
    # The shard caps (None from a server older than them): a new collection past them is refused (409).
    max_shards_per_collection: int | None = None
    max_shards: int | None = None
    shards: int | None = None
    max_highlight_hits: int | None = None  # None: a server from before the limit
    max_aliases: int | None = None  # these three too
    max_filter_ids: int | None = None
    max_get_documents: int | None = None


class Alias(_Response):
    """A name that points at a collection; every call that takes a collection name takes an alias too."""

    alias: str
    collection: str


class AliasList(_Response):
    aliases: list[Alias]


class Snapshot(_Response):
    """A snapshot the server keeps of a collection: one tar of its documents, passages, embeddings and settings."""

    name: str = Field(description="<collection>-<UTC yyyymmddThhmmss>-<6 hex>.tar, made by the server")
    collection: str
    created_at: float = Field(description="when its doc stores were copied (Unix time)")
    bytes: int = Field(description="size of the tar")
    documents: int
    passages: int
    sha256: str = Field(description="of the whole tar, as `sha256sum` prints it")


class SnapshotList(_Response):
    snapshots: list[Snapshot]


class Ranks(_Response):
    dense: int | None = None
    bm25: int | None = None


class Hit(_Response):
    id: str
    score: float
    title: str
    text: str
    metadata: dict[str, Any]
    passage: PassageRef
    ranks: Ranks
    rerank_score: float | None = None
    highlights: list[tuple[int, int]] | None = Field(
        None, description="with highlight=True: [start, end) offsets in text of the words that match a query term"
    )


class RerankInfo(_Response):
    model: str
    status: str = Field(description="ok, timeout or error")
    top_n: int
    scored: int
    took_ms: float
    error: str | None = None
    weight: float


class SearchResponse(_Response):
    hits: list[Hit]
    took_ms: float
    rerank: RerankInfo | None = None


class BatchSearchResponse(_Response):
    results: list[SearchResponse]
    took_ms: float


class Document(BaseModel):
    """A document to index (a plain dict with the same keys works too)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    text: str
    title: str | None = None
    metadata: dict[str, Any] | None = None


class Rerank(BaseModel):
    """Cross-encoder rerank options of a search; unset fields take the server's defaults."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    top_n: int | None = None
    max_ms: float | None = None
    weight: float | None = None


class Fusion(BaseModel):
    """How a hybrid search fuses its dense and BM25 lists; unset: the collection's own choice ("auto")."""

    model_config = ConfigDict(extra="forbid")
    method: FusionMethod = "auto"
    alpha: float | None = None  # dense's share (convex weight; rrf: weights 2a and 2(1 - a))
    normalization: Normalization | None = None  # convex only
