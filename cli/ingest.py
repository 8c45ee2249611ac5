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
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from cli.arg_types import positive_int
from cli.interrupts import GracefulStop


class BadInput(ValueError):
    """The input cannot be ingested as it is: the message names the line or document."""


def read_documents(path: Path) -> Iterator[dict[str, Any]]:
    """A BEIR folder (corpus.jsonl with _id), or a JSONL file of API documents ({id, text, title?, metadata?}).
    A JSONL line is checked as `POST /index` checks a document. Every fault is a ValueError naming the line."""
    from velaio.lines import json_objects

    if path.is_dir():
        from velaio.beir import read_corpus

        if not (path / "corpus.jsonl").is_file():
            raise BadInput(f"{path} is a folder without corpus.jsonl: give a BEIR folder or a JSONL file")
        yield from read_corpus(path)
        return
    if not path.is_file():
        raise BadInput(f"no file or folder {path}")
    from pydantic import ValidationError

    from service.schemas import Document

    for n, d in json_objects(path, "a document"):
        raw_id = d.get("id", d.get("_id"))
        if raw_id is None:
            raise BadInput(f"{path}:{n}: the document has no id (an `id` or `_id` field)")
        doc = {"id": str(raw_id), **{k: v for k, v in d.items() if k in ("title", "text", "metadata")}}
        try:
            Document.model_validate(doc)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
            raise BadInput(f"{path}:{n} (id {doc['id'][:100]!r}): {problems}") from None
        yield doc


def load_documents(source: Path, docs: Iterable[dict[str, Any]], settings: Any) -> list[dict[str, Any]]:
    """All documents, refused as `POST /index` refuses a request: none at all, a repeated id (which one would
    win?) or metadata out of the server's bounds. `vela ingest` and `vela eval` load a corpus through here."""
    from service.limits import metadata_problem

    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, d in enumerate(docs):
        if d["id"] in seen:
            raise BadInput(f"{source}: id {d['id'][:100]!r} is given twice (documents {seen[d['id']] + 1} and {i + 1})")
        seen[d["id"]] = i
        problem = metadata_problem(d.get("metadata"), settings)
        if problem is not None:
            raise BadInput(f"{source}: document {i + 1} (id {d['id'][:100]!r}): {problem}")
        out.append(d)
    if not out:
        raise BadInput(f"{source} holds no documents")
    return out


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


def main(args: argparse.Namespace) -> int:
    from cli.console import DocumentBar
    from cli.model_names import ModelRefused, resolve_model
    from cli.models import models_dir
    from indexing.collection import CollectionConflict, validate_name
    from indexing.ingest import run_job
    from indexing.jobs import JobKind, JobStatus
    from indexing.merger import wait_background
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
    try:  # every document checked before a collection is made or a job recorded
        docs = load_documents(args.data, islice(read_documents(args.data), args.max_docs), settings)
    except ValueError as e:  # BadInput, and a BEIR or JSONL file's faults (file and line named)
        print(f"vela ingest: {e}", file=sys.stderr)
        return 2
    state = build_state(settings)
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
    job = state.jobs.create(collection=coll.name, kind=JobKind.UPSERT, payload=docs, running_in=worker)
    # Named at the start, so that an interrupted run can be followed (GET /jobs/{id}) or retried.
    print(f"job {job.id}: {len(docs)} documents into {coll.name!r}", file=sys.stderr)
    stop = GracefulStop("stopping after this batch; what is stored stays searchable")
    # Closed at the last document: the job's commit after it would otherwise print the bar again, later.
    with stop, DocumentBar(f"ingest {coll.name}", total=len(docs)) as bar:

        def advance(done: int, total: int) -> None:
            bar(done, total)
            if stop.requested:  # the job stops at its next batch, as a cancel through the API would stop it
                state.jobs.request_cancel(job.id)

        try:  # the same job runner as a server's queue: with --ray, run_job hands the upsert to Ray Data
            status = run_job(
                job_id=job.id,
                jobs=state.jobs,
                collections=state.collections,
                embedders=state.embedders,
                batch_size=settings.ingest_batch_size,
                on_progress=advance,
                worker=worker,
                ray=settings.ray_ingest() if args.ray else None,  # VELA_RAY_ADDRESS alone does not send it to Ray
            )
        except KeyboardInterrupt:  # stopped mid-batch: failed, so that POST /jobs/{id}/retry can finish it
            state.jobs.finish(job.id, JobStatus.FAILED, error="interrupted (vela ingest stopped at once)")
            print(f"vela ingest: interrupted; job {job.id} failed: {AGAIN}", file=sys.stderr)
            return 130
    wait_background()  # merges and the fusion choice the job made due: not cut short by this process's end
    final = state.jobs.get(job.id)
    # The model by the name requests use (as GET /collections shows it), not the packaged default's folder inside
    # the Python environment; a folder the operator gave (no name reaches it) is shown as that folder.
    shown = public_model_name(settings=settings, stored=coll.settings.embedder)
    stats = {**coll.stats(), "embedder": coll.settings.embedder if shown == UNREGISTERED else shown}
    print(json.dumps({"job_id": job.id, "status": str(status), "error": final.error, "stats": stats}, indent=2))
    if status == JobStatus.CANCELLED and stop.requested:
        print(f"vela ingest: stopped at {final.done} of {final.total} documents: {AGAIN}", file=sys.stderr)
        return 130
    return 0 if status == JobStatus.SUCCEEDED else 1


AGAIN = "the same command again stores the rest (documents stored already are not encoded again)"
