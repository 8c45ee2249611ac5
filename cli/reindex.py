"""`vela reindex`: a new generation of a collection with another embedder, from the command line.

    vela reindex scifact --embedder my-model [--promote manual] [--gate judged --gate-mode dense]
    vela reindex scifact --promote-ready     # promote what a manual reindex finished
    vela reindex scifact --rollback          # back to the previous generation

It runs the same job as POST /collections/{name}/reindex, recorded in the data directory's job store (a server on
the same data directory shows it at GET /jobs/{id}, and switches to the new generation when it is promoted), here
in this process with a progress bar. Interrupted (Ctrl-C), the job is marked failed, as `vela ingest` marks its
own: nothing runs it any more, a new reindex or rollback of the collection is not held up by it, and
`vela reindex COLLECTION --resume JOB_ID` (which the interrupted command prints) or POST /jobs/{id}/retry runs it
to its end from where it stopped. Killed (no chance to mark it), it stays running until the next `vela serve` on
that data directory resumes it, or `--resume` does. Exit codes: EXIT_CODES, 2 for a bad argument (nothing is
recorded), 3 while another reindex of the collection is unfinished.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

# 0 succeeded; 1 the job failed (a refused gate too); 2 a bad argument, checked before any job is recorded;
# 3 a reindex, promote or rollback of the collection is unfinished (busy); 130 interrupted, or the job cancelled.
EXIT_CODES = {"succeeded": 0, "failed": 1, "cancelled": 130}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("collection", help="collection (or alias) to reindex")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--embedder", help="the new generation's embedder: a registered name (vela models list)")
    what.add_argument("--promote-ready", action="store_true", help="promote the generation a manual reindex built")
    what.add_argument("--rollback", action="store_true", help="switch back to the previous generation")
    what.add_argument("--resume", metavar="JOB_ID", help="run an interrupted (or failed) generation job to its end")
    p.add_argument("--promote", choices=["auto", "manual"], default="auto", help="manual: wait for --promote-ready")
    p.add_argument("--gate", metavar="DATASET", default=None, help="a registered dataset (vela datasets add NAME PATH)")
    p.add_argument("--gate-split", default="test", help="the dataset's qrels split (default test)")
    p.add_argument("--gate-mode", choices=["dense", "bm25", "hybrid"], default="dense", help="how both are searched")
    p.add_argument("--gate-tolerance", type=float, default=0.0, help="promote when new >= old - this (default 0)")
    p.add_argument("--chunk-tokens", type=int, default=None, help="new chunking: tokens per passage")
    p.add_argument(
        "--chunk-overlap",
        type=int,
        default=None,
        help="new chunking: overlap (with --chunk-tokens; default: the serving generation's)",
    )
    p.add_argument("--reencode", action="store_true", help="encode every document, never copy the stored vectors")
    p.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")


# The API's field names, said as this command's flags (a refusal names what the user typed).
FLAGS = {
    ("chunking", "max_tokens"): "--chunk-tokens",
    ("chunking", "overlap"): "--chunk-overlap",
    ("chunking",): "--chunk-tokens/--chunk-overlap",
    ("gate", "tolerance"): "--gate-tolerance",
    ("gate", "split"): "--gate-split",
    ("gate", "dataset"): "--gate",
    ("gate",): "--gate",
}


class BadOption(ValueError):
    """An option the API's request schema refuses: the same bounds as POST /collections/{name}/reindex."""


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The reindex options, checked by the API's own request schema, so that a value the API refuses with a 422
    is refused here before any job is recorded (it used to fail inside the job, or build a whole generation)."""
    from pydantic import ValidationError

    from service.reindex_schemas import ReindexRequest

    if args.chunk_overlap is not None and args.chunk_tokens is None:
        raise BadOption("--chunk-overlap goes with --chunk-tokens (the new chunking's tokens per passage)")
    body: dict[str, Any] = {"embedder": args.embedder, "promote": args.promote, "reencode": args.reencode}
    if args.gate:
        body["gate"] = {
            "dataset": args.gate,
            "split": args.gate_split,
            "mode": args.gate_mode,
            "tolerance": args.gate_tolerance,
        }
    if args.chunk_tokens is not None:
        overlap = {} if args.chunk_overlap is None else {"overlap": args.chunk_overlap}  # else the serving one's
        body["chunking"] = {"max_tokens": args.chunk_tokens, **overlap}
    try:
        return ReindexRequest.model_validate(body).spec()
    except ValidationError as exc:
        error = exc.errors()[0]
        where = tuple(str(part) for part in error["loc"])
        flag = FLAGS.get(where) or FLAGS.get(where[:1]) or "--" + "-".join(where)
        raise BadOption(f"{flag}: {error['msg']}") from None


def main(args: argparse.Namespace) -> int:
    from indexing.collection import CollectionConflict, CollectionNotFound
    from indexing.jobs import JobKind
    from service.model_registry import ModelKindMismatch, ModelUnavailable, UnknownModelName, UnusableModel
    from service.reindex import InvalidChunking, NothingToSwitch, UnknownDataset, create_switch, reindex_spec
    from service.settings import Settings
    from service.state import build_state

    if args.embedder:  # a registered name only (the server records it): a folder is told how to become one
        from cli.model_names import registered_only
        from cli.models import models_dir

        why = registered_only(args.embedder, flag="--embedder", registry=models_dir(data=args.data_dir))
        if why:
            return _fail(why, 2)
        try:
            checked = options(args)
        except BadOption as exc:
            return _fail(str(exc), 2)
    settings = Settings(data_dir=Path(args.data_dir)) if args.data_dir else Settings()
    # Leased as `vela ingest`'s jobs are (renewed while it runs, below): killed outright, this command leaves a job
    # that a server or a worker of the data directory takes over once the lease expires, instead of one that
    # stays `running` with nobody running it.
    state = build_state(settings, lease_s=settings.claim_idle_s)
    try:
        if args.resume:
            job = _job_to_resume(state, args.collection, args.resume)
        elif args.embedder:
            spec = reindex_spec(state=state, collection=args.collection, embedder=args.embedder, options=checked)
            job = state.jobs.create(
                collection=spec["collection"], kind=JobKind.REINDEX, payload=[spec], running_in=WORKER
            )
        else:
            kind = JobKind.ROLLBACK if args.rollback else JobKind.PROMOTE
            job = create_switch(state=state, collection=args.collection, kind=kind, running_in=WORKER)
    except UnknownDataset as exc:  # the API's field names, said as this command's flags
        return _fail(str(exc).replace("gate.dataset:", "--gate:").replace("gate.split:", "--gate-split:"), 2)
    except InvalidChunking as exc:
        return _fail(str(exc).replace("chunking.max_tokens", "--chunk-tokens").replace("chunking.", "--chunk-"), 2)
    except (UnknownModelName, ModelKindMismatch, UnusableModel, ModelUnavailable, NothingToSwitch, BadResume) as exc:
        return _fail(str(exc), 2)
    except CollectionNotFound:
        return _fail(f"no collection named {args.collection!r}", 2)
    except BusyJob as exc:
        return _fail(str(exc), 3)
    except CollectionConflict as exc:  # busy: not a bad argument, the same command works later
        return _fail(f"{exc} (one that a `vela reindex` left unfinished: --resume JOB_ID runs it to its end)", 3)
    print(f"job {job.id} ({job.kind.value} {job.collection})", file=sys.stderr)
    return _run(state, job, args)


WORKER = "vela-reindex"  # the job store's name for this command, as a runner of jobs
INTERRUPTED = "interrupted (vela reindex stopped at once): --resume or a retry runs it to its end"


class BadResume(ValueError):
    """--resume names no job, or one this command does not run."""


class BusyJob(RuntimeError):
    """--resume names a job another live process runs."""


def _job_to_resume(state: Any, collection: str, job_id: str) -> Any:
    from indexing.jobs import GENERATION_KINDS, JobNotFound, JobStatus

    try:
        job = state.jobs.get(job_id)
    except JobNotFound:
        raise BadResume(f"--resume: no job {job_id!r} in this data directory's job store") from None
    if job.kind not in GENERATION_KINDS:
        raise BadResume(f"--resume: job {job_id} is {job.kind.value}, not a reindex, promote or rollback")
    name = state.collections.get(collection).name  # an alias names the collection its jobs record
    if job.collection != name:
        raise BadResume(f"--resume: job {job_id} is collection {job.collection!r}'s, not {name!r}'s")
    if job.status == JobStatus.RUNNING and job.id in state.jobs.leases.held():
        # Another process runs it and renews its lease (a server that took it over, a worker): taken here, it would
        # run twice; it is that process's to end.
        runner = state.jobs.worker(job_id) or "another process"
        raise BusyJob(
            f"--resume: job {job_id} is running in {runner}, which renews its lease: follow it with "
            f"GET /jobs/{job_id} (`--resume` takes a job that was interrupted or whose runner is gone)"
        )
    if job.status == JobStatus.FAILED:  # interrupted (or failed): queued again, as POST /jobs/{id}/retry does
        job = state.jobs.requeue(job.id)
    return job


def _run(state: Any, job: Any, args: argparse.Namespace) -> int:
    """Run the job here with a bar of its documents (a promotion or rollback counts none: no bar); the job's
    status and result as JSON on stdout, and a failed job's error in one line on stderr."""
    from cli.console import DocumentBar, job_errors_in_one_line, quiet_libraries
    from cli.ingest_run import renewing
    from indexing.ingest import run_job
    from indexing.jobs import JobStatus

    title = f"{job.kind.value} {job.collection}"
    try:
        with quiet_libraries(), job_errors_in_one_line(), DocumentBar(title) as bar, renewing(state.jobs):
            status = run_job(
                job_id=job.id,
                jobs=state.jobs,
                collections=state.collections,
                embedders=state.embedders,
                on_progress=bar,
                worker=WORKER,
                metadata_limits=state.settings.metadata_limits(),
            )
    except KeyboardInterrupt:  # stopped at once: failed, so that nothing waits for it and a retry resumes it
        if not state.jobs.leases.owns(job.id):  # it was waiting for a job another process runs: that one's to end
            return _fail(
                f"interrupted; job {job.id} runs on in another process: follow it with GET /jobs/{job.id}", 130
            )
        # Left `running`, no process would run it (a server runs jobs it finds queued), a cancel would wait for a
        # runner that is gone, and the collection's next reindex or rollback would be refused as busy.
        state.jobs.finish(job.id, JobStatus.FAILED, error=INTERRUPTED)
        return _fail(
            f"interrupted; job {job.id} failed: `{_resume_command(args, job)}` runs it to its end from where it "
            f"stopped (so does POST /jobs/{job.id}/retry on a server)",
            130,
        )
    done = state.jobs.get(job.id)
    print(json.dumps({"job_id": done.id, "status": done.status.value, "error": done.error, "result": done.result}))
    if status == JobStatus.FAILED:
        print(f"vela reindex: job {done.id} failed: {done.error}", file=sys.stderr)
    elif status == JobStatus.CANCELLED:
        print(f"vela reindex: job {done.id} was cancelled{': ' + done.error if done.error else ''}", file=sys.stderr)
    return EXIT_CODES.get(status, 1)


def _resume_command(args: argparse.Namespace, job: Any) -> str:
    words = ["vela", "reindex", args.collection, "--resume", job.id]
    if args.data_dir:
        words += ["--data-dir", args.data_dir]
    return " ".join(shlex.quote(w) for w in words)


def _fail(message: str, code: int) -> int:
    print(f"vela reindex: {message}", file=sys.stderr)
    return code
