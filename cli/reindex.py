"""`vela reindex`: a new generation of a collection with another embedder, from the command line.

    vela reindex scifact --embedder my-model [--promote manual] [--gate judged --gate-mode dense]
    vela reindex scifact --promote-ready     # promote what a manual reindex finished
    vela reindex scifact --rollback          # back to the previous generation

It runs the same job as POST /collections/{name}/reindex, recorded in the data directory's job store (a server on
the same data directory shows it at GET /jobs/{id}, and switches to the new generation when it is promoted), here
in this process with a progress bar. Killed, it is resumed by the next `vela serve` on that data directory (or by
running the command again with --resume JOB_ID).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("collection", help="collection (or alias) to reindex")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--embedder", help="the new generation's embedder: a registry name (vela models list)")
    what.add_argument("--promote-ready", action="store_true", help="promote the generation a manual reindex built")
    what.add_argument("--rollback", action="store_true", help="switch back to the previous generation")
    what.add_argument("--resume", metavar="JOB_ID", help="run an interrupted generation job to its end")
    p.add_argument("--promote", choices=["auto", "manual"], default="auto", help="manual: wait for --promote-ready")
    p.add_argument("--gate", metavar="DATASET", default=None, help="a registered dataset (vela datasets add NAME PATH)")
    p.add_argument("--gate-split", default="test", help="the dataset's qrels split (default test)")
    p.add_argument("--gate-mode", choices=["dense", "bm25", "hybrid"], default="dense", help="how both are searched")
    p.add_argument("--gate-tolerance", type=float, default=0.0, help="promote when new >= old - this (default 0)")
    p.add_argument("--chunk-tokens", type=int, default=None, help="new chunking: tokens per passage")
    p.add_argument("--chunk-overlap", type=int, default=None, help="new chunking: overlap (with --chunk-tokens)")
    p.add_argument("--reencode", action="store_true", help="encode every document, never copy the stored vectors")
    p.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")


def options(args: argparse.Namespace) -> dict[str, Any]:
    gate = None
    if args.gate:
        gate = {"dataset": args.gate, "split": args.gate_split, "mode": args.gate_mode}
        gate["tolerance"] = args.gate_tolerance
    chunking = None
    if args.chunk_tokens is not None:
        chunking = {"max_tokens": args.chunk_tokens, "overlap": args.chunk_overlap or 0}
    return {"chunking": chunking, "promote": args.promote, "gate": gate, "reencode": args.reencode}


def main(args: argparse.Namespace) -> int:
    from indexing.collection import CollectionConflict, CollectionNotFound
    from indexing.ingest import run_job
    from indexing.jobs import JobKind, JobStatus
    from service.model_registry import ModelKindMismatch, UnknownModelName, UnusableModel
    from service.reindex import NothingToSwitch, UnknownDataset, reindex_spec, switch_spec
    from service.settings import Settings
    from service.state import build_state

    settings = Settings(data_dir=Path(args.data_dir)) if args.data_dir else Settings()
    state = build_state(settings)
    try:
        if args.resume:
            job = state.jobs.get(args.resume)
        elif args.embedder:
            spec = reindex_spec(state=state, collection=args.collection, embedder=args.embedder, options=options(args))
            job = state.jobs.create(collection=spec["collection"], kind=JobKind.REINDEX, payload=[spec])
        else:
            kind = JobKind.ROLLBACK if args.rollback else JobKind.PROMOTE
            spec = switch_spec(state=state, collection=args.collection, kind=kind)
            job = state.jobs.create(collection=spec["collection"], kind=kind, payload=[spec])
    except (UnknownModelName, ModelKindMismatch, UnusableModel, UnknownDataset, NothingToSwitch) as exc:
        print(f"vela reindex: {exc}", file=sys.stderr)
        return 2
    except CollectionNotFound:
        print(f"vela reindex: no collection named {args.collection!r}", file=sys.stderr)
        return 2
    except CollectionConflict as exc:
        print(f"vela reindex: {exc}", file=sys.stderr)
        return 3
    print(f"job {job.id} ({job.kind.value} {job.collection})", file=sys.stderr)
    with tqdm(desc=f"{job.kind.value} {job.collection}", unit="doc") as bar:

        def advance(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        status = run_job(
            job_id=job.id,
            jobs=state.jobs,
            collections=state.collections,
            embedders=state.embedders,
            on_progress=advance,
            worker="vela-reindex",
        )
    done = state.jobs.get(job.id)
    print(json.dumps({"job": done.id, "status": done.status.value, "error": done.error, "result": done.result}))
    return {JobStatus.SUCCEEDED: 0, JobStatus.CANCELLED: 130}.get(status, 1)
