"""`vela ingest`: load a corpus into a collection from the command line, in this process or on Ray.

    vela ingest --data ../shared/data/beir/scifact --collection scifact [--shards 3] [--ray 127.0.0.1:6379]

The input is read twice: once to check every document before anything is written (cli/ingest_input.py), then
again as consecutive jobs of bounded size (--job-docs, --job-bytes), each recorded just before it runs, so that
memory and every job's payload follow a job, not the corpus (cli/ingest_run.py). A job is what `GET /jobs/{id}`
of a server on the same data directory follows. Without --ray the jobs run here, exactly as a server's
in-process queue would run them; with --ray the collection must be sharded, and Ray Data embeds each job on
the cluster (indexing/ray_ingest.py).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Iterable
from itertools import islice
from pathlib import Path
from typing import Any

from cli.arg_types import int_within, positive_int
from cli.interrupts import JOIN_S, exit_now, terminate_as_interrupt

# A job's size by default. 10,000 documents is the most that one POST /index takes (VELA_MAX_BATCH_DOCUMENTS) and
# 32 MiB its largest JSON body (VELA_MAX_JSON_BYTES): a job of `vela ingest` is then no larger than one a server
# takes, whose payload a job runner reads back whole (several times its JSON size as Python objects) and that
# reads of pending documents scan. Jobs that size still run long enough (a minute or more of encoding on a CPU)
# that the commit, merges and fusion choice each job ends with stay a small share of the time.
JOB_DOCS = 10_000
JOB_BYTES = 32 * 1024 * 1024
# SQLite refuses a text value over 1,000,000,000 bytes (its default SQLITE_MAX_LENGTH): no larger job can be
# recorded.
MAX_JOB_BYTES = 1_000_000_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, type=Path, help="BEIR folder or JSONL file of documents")
    p.add_argument("--collection", required=True, help="collection name (created when missing)")
    p.add_argument("--shards", type=positive_int, default=None, help="shards of a new collection (default 1)")
    p.add_argument(
        "--embedder", default=None, help="embedder of a new collection: a registered name, 'default', or a model folder"
    )
    p.add_argument("--ray", default=None, metavar="ADDRESS", help="Ray cluster to embed on (host:port or 'auto')")
    p.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")
    p.add_argument("--max-docs", type=positive_int, default=None, help="only the first N documents")
    p.add_argument(
        "--actors", type=positive_int, default=None, help="--ray: encoder actors (default: per GPU, else per node)"
    )
    p.add_argument(
        "--job-docs", type=positive_int, default=JOB_DOCS, metavar="N", help=f"documents per job (default {JOB_DOCS})"
    )
    p.add_argument(
        "--job-bytes",
        type=int_within(1, MAX_JOB_BYTES),
        default=JOB_BYTES,
        metavar="BYTES",
        help=f"a job's documents as JSON, at most about this many bytes (default {JOB_BYTES}); a larger document "
        "is a job of its own",
    )


def main(args: argparse.Namespace) -> int:
    from cli.ingest_input import check_corpus, job_batches, read_documents
    from cli.ingest_run import run_jobs
    from cli.model_names import ModelRefused, resolve_model
    from cli.models import models_dir
    from indexing.collection import CollectionConflict, validate_name
    from indexing.jobs import JobStatus
    from indexing.shards import ShardedCollection
    from service.documents import get_or_create_collection
    from service.model_registry import UNREGISTERED, public_model_name
    from service.settings import Settings
    from service.state import build_state

    update: dict[str, Any] = {"data_dir": Path(args.data_dir)} if args.data_dir else {}
    if args.ray:
        update["ray_address"] = args.ray
        if args.actors is not None:
            update["ray_encoder_actors"] = args.actors
    settings = Settings().model_copy(update=update)
    try:  # before any model loads
        validate_name(args.collection)
    except ValueError as e:
        print(f"vela ingest: {e}", file=sys.stderr)
        return 2
    # Named as every offline command names a model, and checked before a collection is made: a reranker's folder
    # would load as an encoder and fail only in the job, leaving a collection whose embedder is a reranker.
    try:
        flag = "--embedder" if args.embedder else "VELA_EMBEDDER"
        embedder = resolve_model(
            args.embedder or settings.embedder, kind="embedder", flag=flag, registry=models_dir(data=args.data_dir)
        )
    except ModelRefused as e:
        print(f"vela ingest: {e}", file=sys.stderr)
        return 2
    # The operator's choice, as the process default: a registered model's folder is what a collection records.
    settings = settings.model_copy(update={"embedder": embedder.load})

    def read() -> Iterable[dict[str, Any]]:
        return islice(read_documents(args.data), args.max_docs)

    try:  # every document checked before a collection is made or a job recorded; only their count is kept
        total = check_corpus(args.data, read, settings)
    except (ValueError, OSError) as e:  # BadInput, a BEIR or JSONL file's faults (file and line named), no access
        print(f"vela ingest: {e}", file=sys.stderr)
        return 2
    try:
        # Its jobs leased, as a worker's are: a worker that finds one running waits for it rather than taking it
        # for stalled while this process is merely slow, and takes it over only once this process is gone.
        state = build_state(settings, lease_s=settings.claim_idle_s)
    except (sqlite3.Error, OSError) as e:  # the job store cannot be opened or made (a read-only or full disk)
        print(f"vela ingest: opening the data directory {settings.data_dir}: {e}", file=sys.stderr)
        return 1
    try:
        coll = get_or_create_collection(state=state, name=args.collection, embedder=None, shards=args.shards)
    except (ValueError, CollectionConflict) as e:  # a name that is no collection's, or one of another shape
        print(f"vela ingest: {e}", file=sys.stderr)
        return 2
    if args.embedder and coll.settings.embedder != str(state.embedders.resolve(embedder.load)):
        # By the name a request or a flag would use: the folder it is stored as is the server's business.
        used = public_model_name(settings=settings, stored=coll.settings.embedder)
        print(
            f"vela ingest: --embedder: collection {args.collection!r} uses embedder {used!r}, not {args.embedder!r}",
            file=sys.stderr,
        )
        return 2
    if args.ray and not isinstance(coll, ShardedCollection):
        print(
            f"vela ingest: --ray needs a sharded collection: {args.collection!r} has 1 shard (create it with "
            "--shards N)",
            file=sys.stderr,
        )
        return 2
    worker = "vela-ingest-ray" if args.ray else "vela-ingest"
    run = run_jobs(
        state=state,
        coll=coll,
        batches=job_batches(read(), args.job_docs, args.job_bytes),  # the input read again, a job at a time
        total=total,
        batch_size=settings.ingest_batch_size,
        worker=worker,
        ray=settings.ray_ingest() if args.ray else None,  # VELA_RAY_ADDRESS alone does not send it to Ray
    )
    if run.interrupted:
        said = f"job {run.failed_job} failed" if run.failed_job else f"stopped at {run.done} of {total} documents"
        print(f"vela ingest: interrupted; {said}: {AGAIN}", file=sys.stderr)
        exit_now(130)  # the job's thread may be inside a batch still: not waited for (cli/ingest_run.py)
    finish_background()
    # The model by the name requests use (as GET /collections shows it), not the packaged default's folder inside
    # the Python environment; a folder the operator gave (no name reaches it) is shown as that folder.
    shown = public_model_name(settings=settings, stored=coll.settings.embedder)
    stats = {**coll.stats(), "embedder": coll.settings.embedder if shown == UNREGISTERED else shown}
    summary = {
        "job_id": run.job_ids[-1] if run.job_ids else None,  # the last job: the one that ended the run
        "job_ids": run.job_ids,
        "status": str(run.status),
        "done": run.done,
        "total": total,
        "error": run.error,
        "stats": stats,
    }
    print(json.dumps(summary, indent=2))
    if run.problem is not None:
        print(f"vela ingest: {run.problem}; {run.done} of {total} documents went through: {AGAIN}", file=sys.stderr)
        return 1
    if run.status == JobStatus.CANCELLED and run.stopped:
        print(f"vela ingest: stopped at {run.done} of {total} documents: {AGAIN}", file=sys.stderr)
        return 130
    return 0 if run.status == JobStatus.SUCCEEDED else 1


def finish_background() -> None:
    """Wait for the merges and the fusion choice the jobs made due, so that this process's end does not cut them
    short; said first, as it can take tens of seconds. Ctrl-C (or SIGTERM) here ends the process at once: a merge
    or a choice cut short loses nothing (indexing/merger.py), what is stored is published and searchable, and
    the next ingest into the collection makes them due again."""
    from indexing.merger import wait_background

    try:
        with terminate_as_interrupt():
            # Said whether or not work is queued (each job's commit queues a merge check): the same lines every run.
            # Said in here: a Ctrl-C or SIGTERM that follows the line at once is handled as this wait's.
            print("vela ingest: finishing merges and the fusion choice...", file=sys.stderr)
            while not wait_background(JOIN_S):  # short waits: a Ctrl-C is handled at once, whichever thread gets it
                pass
    except KeyboardInterrupt:
        print(
            "vela ingest: interrupted while finishing merges and the fusion choice; what is stored is searchable, "
            "and the next ingest into the collection makes them",
            file=sys.stderr,
        )
        exit_now(130)  # the background thread may be inside a merge: not waited for


AGAIN = "the same command again stores the rest (documents stored already are not encoded again)"
