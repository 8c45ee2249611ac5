"""Distributed ingest of a sharded collection on Ray: Ray Data `map_batches` over encoder actors.

Only `vela ingest --ray` and jobs run with VELA_RAY_ADDRESS import this module, and it imports Ray inside
its functions: Ray is an optional extra. The pipeline:

1. this process (the driver) skips documents whose content hash is unchanged in their shard;
2. Ray Data splits the rest into blocks and streams them through a pool of encoder actors (one per GPU
   when the cluster has GPUs, else one per node), each of which chunks and embeds with the same code as
   the in-process ingest (`chunk_and_embed`);
3. the driver writes each embedded batch into its shards' doc stores as it arrives (progress is
   reported per batch, like any job) and finally commits: one new segment per shard of what it wrote
   (indexing/shard_writer.py), cheap enough to run in the driver.

Every node needs the data directory at the same path (a shared volume), as `vela worker`s already do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from indexing.chunking import ChunkingParams
from indexing.docstore import StoredDocument
from indexing.jobs import JobStatus, JobStore
from indexing.metadata_fit import late_misfit
from indexing.prepare import chunk_and_embed, content_hash
from indexing.settings import RayIngestOptions
from indexing.shards import ShardedCollection

log = logging.getLogger("vela.ray_ingest")
NAMESPACE = "vela"
T = TypeVar("T")


def connect(address: str) -> Any:
    import ray

    if not ray.is_initialized():
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, configure_logging=False)
    return ray


class ChunkEmbedActor:
    """A Ray Data actor: loads the embedder once, then chunks and embeds batches of documents."""

    def __init__(self, *, model_dir: str, chunking: dict[str, int], device: str, precision: str) -> None:
        from models import EmbedderCache

        self.embedder = EmbedderCache(device=device, precision=precision).get(model_dir)
        self.chunking = ChunkingParams(**chunking)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        docs = [
            {"id": str(i), "title": str(t), "text": str(x), "metadata": json.loads(str(m))}
            for i, t, x, m in zip(batch["id"], batch["title"], batch["text"], batch["metadata"], strict=True)
        ]
        stored = chunk_and_embed(docs, chunking=self.chunking, embedder=self.embedder)
        return {
            **batch,
            "spans": np.array([json.dumps([list(s) for s in d.spans]) for d in stored], dtype=object),
            # Variable passages per document: raw float32 bytes, reshaped by the driver with the dim.
            "vectors": np.array(
                [np.ascontiguousarray(d.embeddings, np.float32).tobytes() for d in stored], dtype=object
            ),
        }


def _stored(batch: dict[str, np.ndarray], chunking: ChunkingParams, dim: int) -> list[StoredDocument]:
    out = []
    for i, t, x, m, s, v in zip(
        *(batch[c] for c in ("id", "title", "text", "metadata", "spans", "vectors")), strict=True
    ):
        doc = {"id": str(i), "title": str(t), "text": str(x), "metadata": json.loads(str(m))}
        out.append(
            StoredDocument(
                doc_id=doc["id"],
                title=doc["title"],
                text=doc["text"],
                metadata=doc["metadata"],
                content_hash=content_hash(doc, chunking),
                spans=[(int(a), int(b)) for a, b in json.loads(str(s))],
                embeddings=np.frombuffer(v, dtype=np.float32).reshape(-1, dim),  # (P, d)
            )
        )
    return out


def ingest_sharded(
    *,
    coll: ShardedCollection,
    documents: Sequence[dict[str, Any]],
    address: str,
    batch_size: int = 256,
    actors: int = 0,
    actor_cpus: float = 1.0,
    precision: str = "fp32",
    on_progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> bool:
    """Embed `documents` on the cluster into the shards of `coll`, then commit. The caller holds no lock:
    this takes the collection's writer lock. Returns False when cancelled (what was written stays)."""
    ray = connect(address)
    chunking = coll.settings.chunking
    with coll.writer():
        coll.reload_settings()  # under the lock: a schema job that ran since this write was asked for
        misfit = late_misfit(coll.settings.schema, documents)
        if misfit is not None:
            raise ValueError(misfit)
        stored: dict[str, str] = {}
        for shard, positions in zip(coll.shards, coll.split([str(d["id"]) for d in documents]), strict=True):
            stored.update(shard.docstore.content_hashes([str(documents[i]["id"]) for i in positions]))
        todo = [d for d in documents if stored.get(str(d["id"])) != content_hash(d, chunking)]
        done = len(documents) - len(todo)  # unchanged documents count as done at once
        if on_progress is not None:
            on_progress(done, len(documents))
        if todo:
            gpus = int(ray.cluster_resources().get("GPU", 0))
            nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
            pool = actors or (gpus if gpus else max(nodes, 1))
            # Batches come back in input order, so passages are numbered as the in-process ingest numbers them.
            ctx = ray.data.DataContext.get_current()
            ctx.execution_options.preserve_order = True
            ctx.enable_progress_bars = False  # progress goes to the job record instead
            rows = [
                {
                    "id": str(d["id"]),
                    "title": d.get("title") or "",
                    "text": d["text"],
                    "metadata": json.dumps(d.get("metadata") or {}),
                }
                for d in todo
            ]
            ds = ray.data.from_items(rows, override_num_blocks=max(pool * 4, 1)).map_batches(
                ChunkEmbedActor,
                fn_constructor_kwargs={
                    "model_dir": coll.settings.embedder,
                    "chunking": {"max_tokens": chunking.max_tokens, "overlap": chunking.overlap},
                    "device": "cuda" if gpus else "cpu",
                    "precision": precision,
                },
                batch_size=batch_size,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=pool),
                num_gpus=1 if gpus else 0,
                num_cpus=actor_cpus,
            )
            log.info(
                "ray ingest", extra={"collection": coll.name, "documents": len(todo), "actors": pool, "gpus": gpus}
            )
            for batch in ds.iter_batches(batch_size=batch_size, batch_format="numpy"):
                stored_docs = _stored(batch, chunking, coll.settings.dim)
                coll.upsert(stored_docs)
                done += len(stored_docs)
                if on_progress is not None:
                    on_progress(done, len(documents))
                if cancelled():
                    break  # every written batch is consistent; the commit below publishes it
        coll.commit()  # each shard adds one segment of what this job wrote: cheap, so it runs here
    return not cancelled()


def run_ray_job(
    *,
    job_id: str,
    jobs: JobStore,
    coll: ShardedCollection,
    payload: list[Any],
    ray: RayIngestOptions,
    batch_size: int,
    on_progress: Callable[[int, int], None] | None = None,
) -> JobStatus:
    """A queued upsert job on Ray (run_job hands it here when the process's settings name a Ray address).
    `on_progress` is the caller's too: a worker's heartbeat, a CLI's progress bar."""

    def progress(done: int, total: int) -> None:
        jobs.progress(job_id, done)
        if on_progress is not None:
            on_progress(done, total)

    finished = ingest_sharded(
        coll=coll,
        documents=payload,
        address=ray.address,
        batch_size=batch_size,
        actors=ray.actors,
        actor_cpus=ray.actor_cpus,
        precision=ray.precision,
        on_progress=progress,
        cancelled=lambda: jobs.cancel_requested(job_id),
    )
    return JobStatus.SUCCEEDED if finished else JobStatus.CANCELLED
