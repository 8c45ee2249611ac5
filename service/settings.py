"""Settings of the API process, from VELA_* environment variables (one BaseSettings class per process)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from indexing.settings import IndexingSettings

AUTO_PROCESSES_MAX = 4


class Settings(IndexingSettings):
    """The API process's settings: the indexing ones plus HTTP, limits and new-collection defaults."""

    api_keys: str = Field("", description="comma-separated API keys; empty turns authentication off")
    read_api_keys: str = Field(
        "", description="comma-separated keys that may only read: searches, counts, facets, recommendations and GETs"
    )
    host: str = "127.0.0.1"
    port: int = 8000
    processes: int = Field(
        0,
        ge=0,
        le=64,
        description="API processes `vela serve` starts on one port; 0: one per CPU core the process may use, at most "
        f"{AUTO_PROCESSES_MAX}, and one on a GPU (each holds its own query encoders and loaded indexes)",
    )
    serving_processes: int = Field(
        1, ge=1, description="set by `vela serve` in each process it starts: how many share the data directory"
    )
    max_document_bytes: int = Field(1_000_000, ge=1, description="largest document text, in UTF-8 bytes")
    max_batch_documents: int = Field(10_000, ge=1, description="most documents in one /index request")
    max_batch_queries: int = Field(256, ge=1, description="most queries in one /search/batch request")
    max_request_bytes: int = Field(
        256 * 1024 * 1024, ge=1024, description="largest request body (a snapshot upload; JSON bodies: max_json_bytes)"
    )
    max_json_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024,
        description="largest JSON request body (every route but the snapshot upload): it is parsed on the event loop",
    )
    chunk_tokens: int = Field(224, ge=16, description="content tokens per passage of new collections")
    chunk_overlap: int = Field(32, ge=0, description="tokens shared by consecutive passages")
    small_dim: int = Field(256, ge=8, description="Matryoshka prefix dims of the small dense index")
    encoder: str = Field(
        "auto",
        pattern="^(auto|onnx|torch)$",
        description="what runs the packaged default embedder: auto (ONNX Runtime int8 on a CPU in fp32, torch on a "
        "GPU or in bf16), onnx or torch (fp32 weights)",
    )
    query_batch_max: int = Field(32, ge=1, description="most queries per encoder pass when micro-batching; 1: off")
    query_batch_wait_ms: float = Field(
        0.0,
        ge=0,
        le=100,
        description="how long a query waits for others to join its encoder pass; 0: none (under load, queries "
        "that arrive while a pass runs share the next one anyway, and a lone query runs its own pass at once)",
    )
    reranker: str | None = Field(None, description="default reranker directory for /search rerank; loaded at start")
    models_dir: Path | None = Field(None, description="model registry; unset: <data dir>/models")
    snapshots_dir: Path | None = Field(None, description="where snapshots are written; unset: <data dir>/snapshots")
    rerank_max_ms: float = Field(2000.0, gt=0, description="rerank time budget per query when a request sets none")
    rerank_weight: float = Field(
        1.0, ge=0, le=1, description="the cross-encoder's share of the reranked order when a request sets none"
    )
    rerank_batch_size: int = Field(16, ge=1, description="(query, passage) pairs per cross-encoder pass")
    # Work of one search request: checked before any is done (413 naming the limit).
    max_search_hits: int = Field(25_600, ge=1, description="(k + offset) x queries of one search request")
    max_highlight_hits: int = Field(
        10_000, ge=1, description="(k + offset) x queries of one search request that asks for highlights"
    )
    max_search_depth: int = Field(256_000, ge=1, description="depth x queries of one search request")
    max_query_chars: int = Field(262_144, ge=1, description="characters of all queries of one request")
    max_response_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="largest response body in UTF-8 bytes: search, one document, a scroll page",
    )
    # Room for new work (service/capacity.py): a job is refused before anything of it is stored.
    min_free_disk_mb: int = Field(
        1024, ge=0, description="writes, snapshots and restores get 507 while the data disk has less free; 0: off"
    )
    min_free_disk_percent: float = Field(
        0.0, ge=0, lt=100, description="the same floor as a share of the disk's size (the higher applies); 0: off"
    )
    max_queued_jobs: int = Field(
        1000, ge=1, description="jobs queued or running; a new one gets 503 queue_full with Retry-After beyond"
    )
    request_timeout_s: float = Field(60.0, gt=0, description="deadline of one request; past it the client gets 503")
    # Slow or incomplete clients: they must not hold connections open.
    body_timeout_s: float = Field(30.0, gt=0, description="longest wait for the next piece of a request body (408)")
    header_timeout_s: float = Field(10.0, gt=0, description="time a connection has to send a request's headers")
    max_header_bytes: int = Field(
        1_048_576, ge=16_384, description="largest request line and headers of one request (431 beyond)"
    )
    keep_alive_s: int = Field(5, ge=1, description="how long an idle keep-alive connection stays open")
    max_connections: int = Field(1024, ge=1, description="concurrent connections; more get 503 at once")
    max_shards: int = Field(
        1024,
        ge=1,
        description="most shards the data directory may hold, all collections together (a new collection past it "
        "gets 409 limit_exceeded); lowered to what the open-files limit holds",
    )
    # aliases.json is read on every lookup by name and rewritten whole by each PUT: bounded so that both stay cheap.
    max_aliases: int = Field(
        10_000, ge=1, description="most aliases of the data directory; a new one past it gets 409 limit_exceeded"
    )
    protect_metrics: bool = Field(False, description="with API keys, /metrics needs a key too")
    protect_docs: bool = Field(False, description="with API keys, /docs, /redoc and /openapi.json need a key too")
    access_log: bool = Field(False, description="one JSON log line per request: method, path, status, ms, id")
    bm25_method: str = Field(
        "lucene", pattern=r"^(lucene|okapi|robertson|atire|bm25l|bm25\+)$", description="BM25 variant (new collections)"
    )
    bm25_k1: float = Field(1.2, ge=0, description="BM25 term-frequency saturation of new collections")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation of new collections")
    bm25_min_token_chars: int = Field(
        2, ge=1, le=2, description="shortest BM25 term of new collections: 2 (bm25s's pattern) or 1 (single letters)"
    )
    bm25_normalize: str = Field(
        "nfkc", pattern=r"^(nfkc|none)$", description="Unicode normalisation of BM25 text in new collections"
    )

    @field_validator("api_keys", "read_api_keys")
    @classmethod
    def _strip(cls, v: str) -> str:
        v = v.strip()
        if v and not any(k.strip() for k in v.split(",")):
            raise ValueError("holds no key (only commas and spaces): leave it empty to turn authentication off")
        return v

    @model_validator(mode="after")
    def _keys_of_one_kind(self) -> Settings:
        if self.api_key_set & self.read_key_set:  # which would it be? refused rather than guessed
            raise ValueError("a key is in both VELA_API_KEYS and VELA_READ_API_KEYS: give each key one kind")
        return self

    @model_validator(mode="after")
    def _overlap_below_passage(self) -> Settings:
        if self.chunk_overlap > self.chunk_tokens // 2:  # ChunkingParams' rule: windows advance by at least half
            raise ValueError(
                f"VELA_CHUNK_OVERLAP ({self.chunk_overlap}) must be at most half of VELA_CHUNK_TOKENS "
                f"({self.chunk_tokens})"
            )
        return self

    def process_count(self, *, gpu: bool = False) -> int:
        """How many API processes `vela serve` starts: VELA_PROCESSES, or with 0 one per usable core (capped), and
        one on a GPU, where the encoder is not CPU-bound and each process would hold its own copy of the models."""
        if self.processes:
            return self.processes
        return 1 if gpu else max(1, min(len(os.sched_getaffinity(0)), AUTO_PROCESSES_MAX))

    @property
    def api_key_set(self) -> frozenset[str]:
        return frozenset(k.strip() for k in self.api_keys.split(",") if k.strip())

    @property
    def read_key_set(self) -> frozenset[str]:
        return frozenset(k.strip() for k in self.read_api_keys.split(",") if k.strip())

    @property
    def auth_on(self) -> bool:
        """Keys are checked: some key of either kind is set."""
        return bool(self.api_key_set or self.read_key_set)
