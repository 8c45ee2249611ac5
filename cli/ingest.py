"""`vela ingest`: load a corpus into a collection from the command line, in this process or on Ray.

    vela ingest --data ../shared/data/beir/scifact --collection scifact [--shards 3] [--ray 127.0.0.1:6379]

The ingest is recorded as a job (so `GET /jobs/{id}` of a server on the same data directory follows it).
Without --ray it runs the job here, exactly as a server's in-process queue would; with --ray the collection
must be sharded, and Ray Data embeds it on the cluster (indexing/ray_ingest.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm


def read_documents(path: Path) -> Iterator[dict[str, Any]]:
    """A BEIR folder (corpus.jsonl with _id), or a JSONL file of API documents ({id, text, title?, metadata?})."""
    if path.is_dir():
        from velaio.beir import read_corpus

        yield from read_corpus(path)
        return
    with open(path, encoding="utf-8") as f:
        for line in filter(str.strip, f):
            d = json.loads(line)
            yield {
                "id": str(d.get("id", d.get("_id"))),
                **{k: v for k, v in d.items() if k in ("title", "text", "metadata")},
            }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, type=Path, help="BEIR folder or JSONL file of documents")
    p.add_argument("--collection", required=True, help="collection name (created when missing)")
    p.add_argument("--shards", type=int, default=None, help="shards of a new collection (default 1)")
    p.add_argument("--embedder", default=None, help="embedder of a new collection: 'default' or a model directory")
    p.add_argument("--ray", default=None, metavar="ADDRESS", help="Ray cluster to embed on (host:port or 'auto')")
    p.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")
    p.add_argument("--max-docs", type=int, default=None, help="only the first N documents")
    p.add_argument("--actors", type=int, default=None, help="--ray: encoder actors (default: per GPU, else per node)")


def main(args: argparse.Namespace) -> int:
    from indexing.ingest import run_job
    from indexing.jobs import JobKind, JobStatus
    from indexing.merger import wait_background
    from indexing.shards import ShardedCollection
    from service.documents import get_or_create_collection
    from service.settings import Settings
    from service.state import build_state

    update: dict[str, Any] = {"data_dir": Path(args.data_dir)} if args.data_dir else {}
    if args.ray:
        update["ray_address"] = args.ray
        if args.actors is not None:
            update["ray_encoder_actors"] = args.actors
    if args.embedder:  # the operator's choice (a registry name or a directory), as the process default
        update["embedder"] = args.embedder
    settings = Settings().model_copy(update=update)
    docs = list(read_documents(args.data))[: args.max_docs]
    state = build_state(settings)
    coll = get_or_create_collection(state=state, name=args.collection, embedder=None, shards=args.shards)
    if args.embedder and coll.settings.embedder != str(state.embedders.resolve(args.embedder)):
        print(f"error: collection {args.collection!r} uses embedder {coll.settings.embedder!r}", file=sys.stderr)
        return 2
    if args.ray and not isinstance(coll, ShardedCollection):
        print(
            f"--ray needs a sharded collection: {args.collection!r} has 1 shard (create it with --shards N)",
            file=sys.stderr,
        )
        return 2
    job = state.jobs.create(collection=coll.name, kind=JobKind.UPSERT, payload=docs)
    with tqdm(total=len(docs), desc=f"ingest {coll.name}", unit="doc") as bar:

        def advance(done: int, _total: int) -> None:
            bar.update(done - bar.n)

        # The same job runner as a server's queue: with --ray, run_job hands the upsert to Ray Data.
        status = run_job(
            job_id=job.id,
            jobs=state.jobs,
            collections=state.collections,
            embedders=state.embedders,
            batch_size=settings.ingest_batch_size,
            on_progress=advance,
            worker="vela-ingest-ray" if args.ray else "vela-ingest",
            ray=settings.ray_ingest() if args.ray else None,  # VELA_RAY_ADDRESS alone does not send it to Ray
        )
    wait_background()  # merges and the fusion choice the job made due: not cut short by this process's end
    final = state.jobs.get(job.id)
    print(json.dumps({"job_id": job.id, "status": str(status), "error": final.error, "stats": coll.stats()}, indent=2))
    return 0 if status == JobStatus.SUCCEEDED else 1
