"""Settings shared by every process that indexes: the API (embedded default) and `vela worker`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from indexing.dense import DenseIndexParams
from indexing.metadata_bounds import MetadataLimits
from models.device import DEVICE_PATTERN, PRECISION_PATTERN

# How a yes/no setting read outside the settings class (VELA_FUSION_AUTO) is spelled: any case, spaces ignored.
SWITCH_ON = ("1", "true", "yes", "on")
SWITCH_OFF = ("0", "false", "no", "off")


def switch(value: str) -> bool:
    """A yes/no setting's value; ValueError for anything but SWITCH_ON or SWITCH_OFF (an empty value included)."""
    word = value.strip().lower()
    if word in SWITCH_ON or word in SWITCH_OFF:
        return word in SWITCH_ON
    accepted = ", ".join(SWITCH_ON + SWITCH_OFF)
    raise ValueError(f"expected one of {accepted} (any case), not {value!r}"[:200])


@dataclass(frozen=True)
class RayIngestOptions:
    """How a process with a Ray address embeds sharded upserts (from its IndexingSettings)."""

    address: str
    actors: int
    actor_cpus: float
    precision: str


class IndexingSettings(BaseSettings):
    """What `vela worker` reads from VELA_* variables; the API's Settings extend it."""

    model_config = SettingsConfigDict(env_prefix="VELA_", env_file=None, extra="ignore")

    data_dir: Path = Field(Path(".vela"), description="where collections, indexes and jobs live")
    embedder: str = Field("default", description="'default' (packaged all-MiniLM-L6-v2) or a local HF model dir")
    # Resolved once at start-up by models.device (auto: CUDA when present; cuda without CUDA: start-up error).
    device: str = Field("auto", pattern=DEVICE_PATTERN, description="auto, cpu, cuda or cuda:N")
    precision: str = Field("auto", pattern=PRECISION_PATTERN, description="auto (bf16 on bf16 GPUs), fp32, bf16")
    gpu_min_passages: int = Field(20_000, ge=0, description="segments from this size are searched on the GPU")
    log_level: str = Field(
        "INFO", pattern=r"(?i)^(debug|info|warning|error|critical)$", description="debug, info, warning, error"
    )
    ingest_batch_size: int = Field(256, ge=1, description="documents per ingest batch (and per progress step)")
    commit_interval_s: float = Field(60.0, gt=0, description="a long ingest publishes its progress this often")
    redis_url: str | None = Field(None, description="redis://host:port/db; unset: the in-process queue")
    queue_stream: str = Field("vela:jobs", description="Redis stream the jobs go through")
    heartbeat_file: Path | None = Field(None, description="`vela worker` touches it while alive (healthchecks)")
    worker_nice: int = Field(10, ge=0, le=19, description="`vela worker` runs at this lower CPU priority")
    worker_threads: int = Field(0, ge=0, description="torch threads of `vela worker` (0: torch's default)")
    claim_idle_s: float = Field(60.0, gt=0, description="a job silent this long is taken over by another worker")
    jobs_retention_days: float = Field(
        7.0, ge=0, allow_inf_nan=False, description="finished jobs older than this are deleted (0: kept for ever)"
    )
    # Read by indexing/fusion_choice.py itself (AUTO_CHOOSE, when it is imported); here so that a bad value stops
    # `vela serve` and `vela worker` at start-up, as every other setting's does.
    fusion_auto: bool = Field(
        True,
        description="each collection chooses its hybrid fusion after ingest jobs: 1, true, yes, on; 0, false, no, off",
    )
    context_refresh_fraction: float = Field(
        0.5,
        gt=0,
        description="CDE collections: queue a context refresh (a reindex to the same embedder, with a new corpus "
        "context) when this fraction of the corpus (documents written or deleted) changed since it was sampled",
    )
    # Dense index of new collections (see indexing/dense.py): "auto" is flat below hnsw_threshold passages.
    dense_index: str = Field("auto", pattern="^(auto|flat|hnsw)$", description="auto, flat or hnsw")
    hnsw_threshold: int = Field(100_000, ge=0, description="passages from which 'auto' builds HNSW")
    hnsw_m: int = Field(32, ge=4, le=256, description="HNSW graph neighbours per node")
    hnsw_ef_construction: int = Field(200, ge=1, description="HNSW candidate list while building")
    hnsw_ef_search: int = Field(128, ge=1, description="HNSW candidate list while searching")

    # Metadata is stored and returned with every hit: bounded at ingest so that no stored document can make a
    # response huge or unserialisable (responses also cap depth, at 128, whatever is stored). Here, not with the
    # API's settings: a patch job checks the metadata it would store, and `vela worker` runs jobs too.
    max_metadata_depth: int = Field(32, ge=1, le=100, description="deepest nesting of a document's metadata")
    max_metadata_bytes: int = Field(65_536, ge=64, description="largest metadata of one document, as compact JSON")
    max_metadata_keys: int = Field(1_000, ge=1, description="most keys in one document's metadata, at all levels")
    max_metadata_values: int = Field(
        4_096,
        ge=1,
        description="most values in one document's metadata, at all levels (each element of a list counts): "
        "bounds what one document costs a filter on a field the schema does not declare",
    )
    # Scale-out on Ray (optional extra `pip install .[ray]`; unset: Ray is never imported).
    ray_address: str | None = Field(
        None, description="Ray cluster (host:port or 'auto'): sharded search on actors, sharded ingest on Ray Data"
    )
    ray_shard_cpus: float = Field(1.0, gt=0, description="logical CPUs each shard search actor reserves")
    ray_encoder_actors: int = Field(0, ge=0, description="Ray Data encoder actors (0: one per GPU, else per node)")
    ray_encoder_cpus: float = Field(1.0, gt=0, description="logical CPUs each Ray Data encoder actor reserves")

    @field_validator("fusion_auto", mode="before")
    @classmethod
    def _fusion_switch(cls, v: object) -> object:
        return switch(v) if isinstance(v, str) else v  # these spellings only (pydantic's bool would also take t, y)

    def jobs_retention_s(self) -> float | None:
        return self.jobs_retention_days * 86_400 if self.jobs_retention_days > 0 else None

    def ray_ingest(self) -> RayIngestOptions | None:
        """None without VELA_RAY_ADDRESS: every job then runs in this process."""
        if not self.ray_address:
            return None
        return RayIngestOptions(self.ray_address, self.ray_encoder_actors, self.ray_encoder_cpus, self.precision)

    def metadata_limits(self) -> MetadataLimits:
        return MetadataLimits(
            self.max_metadata_depth, self.max_metadata_keys, self.max_metadata_values, self.max_metadata_bytes
        )

    def dense_index_params(self) -> DenseIndexParams:
        return DenseIndexParams(
            kind=self.dense_index,
            hnsw_threshold=self.hnsw_threshold,
            hnsw_m=self.hnsw_m,
            ef_construction=self.hnsw_ef_construction,
            ef_search=self.hnsw_ef_search,
        )


def settings_error(exc: ValidationError) -> str:
    """The settings' faults on one line, each named by its environment variable (VELA_PORT, not `port`)."""
    parts = []
    for err in exc.errors():
        loc = err.get("loc") or ()
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"VELA_{str(loc[0]).upper()}: {msg}" if loc else msg)
    return "; ".join(parts)
