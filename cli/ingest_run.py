"""`vela ingest`'s jobs: the corpus recorded and run as consecutive upsert jobs of bounded size, one after another
in this process, under one progress bar over the whole corpus.

Each job is recorded just before it runs, so that the process holds one job's documents at a time and the job
store never holds more than the jobs already run; each is named as it starts, so that an interrupted run can be
followed (`GET /jobs/{id}`). A first Ctrl-C asks the running job to stop after its batch, and no further job is
recorded; a second stops at once and leaves the running job `failed`. The jobs run on a worker thread, so that
both are handled the moment they come (cli/interrupts.py)."""

from __future__ import annotations

import logging
import sqlite3
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from cli.console import DocumentBar
from cli.interrupts import GracefulStop, run_off_main_thread
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus
from indexing.settings import RayIngestOptions

INTERRUPTED = "interrupted (vela ingest stopped at once)"
log = logging.getLogger("vela.ingest")


@dataclass
class IngestRun:
    """How the jobs went. `done`: documents of the input that the jobs went through (stored, or found stored
    already); `problem`: why no further job could be recorded or read, for the command to print."""

    total: int
    job_ids: list[str] = field(default_factory=list)
    status: JobStatus = JobStatus.SUCCEEDED
    done: int = 0
    error: str | None = None
    problem: str | None = None
    interrupted: bool = False  # a second Ctrl-C: the running job was stopped at once
    failed_job: str | None = None  # the job that second Ctrl-C left `failed`, if one was running
    stopped: bool = False  # Ctrl-C (or SIGTERM) asked the run to stop


def _next(batches: Iterator[list[dict[str, Any]]], run: IngestRun) -> list[dict[str, Any]] | None:
    """The next job's documents, None at the end; a fault reading them (the input changed or went since it was
    checked) ends the run with `problem`."""
    try:
        return next(batches, None)
    except (ValueError, OSError) as e:
        run.problem = f"reading the input again: {e}"
        return None


def _record(state: Any, coll: Any, batch: list[dict[str, Any]], worker: str, run: IngestRun) -> str | None:
    """The job's id, or None with `problem` set: a job store that cannot take it (a full disk, a read-only file,
    a payload over SQLite's limit) ends the run in one line, never a traceback."""
    try:
        return str(state.jobs.create(collection=coll.name, kind=JobKind.UPSERT, payload=batch, running_in=worker).id)
    except (sqlite3.Error, OSError) as e:
        hint = " (a smaller --job-bytes or --job-docs makes smaller jobs)" if isinstance(e, sqlite3.DataError) else ""
        docs = f"documents {run.done + 1} to {run.done + len(batch)}"
        run.problem = f"could not record the job of {docs} in {state.jobs.path}: {e}{hint}"
        return None


@contextmanager
def renewing(jobs: Any) -> Iterator[None]:
    """Renew the leases of the jobs this process runs every third of their length, on a thread of its own (a batch
    inside a long native call does not hold it up), until the block ends."""
    lease_s = jobs.leases.lease_s
    done = threading.Event()

    def beat() -> None:
        while not done.wait(lease_s / 3):
            try:
                jobs.leases.renew()
            except sqlite3.Error as e:  # the job store busy or failing: the next beat tries again
                log.warning("job leases not renewed", extra={"error": str(e)})

    thread = None
    if lease_s is not None:
        thread = threading.Thread(target=beat, name="vela-ingest-leases", daemon=True)
        thread.start()
    try:
        yield
    finally:
        done.set()
        if thread is not None:
            thread.join()


def run_jobs(
    *,
    state: Any,
    coll: Any,
    batches: Iterable[list[dict[str, Any]]],
    total: int,
    batch_size: int,
    worker: str,
    ray: RayIngestOptions | None,
) -> IngestRun:
    """Record and run one job per batch until the input ends, a job does not succeed, or Ctrl-C.

    The jobs run on a worker thread (cli/interrupts.py): this thread only waits, so a Ctrl-C is handled at once
    even while a batch is inside a long native call. After a second Ctrl-C the run returns with `interrupted`
    while that thread may still be encoding or writing: the caller ends the process (`exit_now`) without
    waiting for it. Nothing is then left that the next run cannot repair: a batch cut short wrote its documents
    to the doc store in SQLite transactions (a transaction cut short rolls back) and published nothing; the
    next job's commit, or a server's check at start-up (check_consistency), indexes what the doc store holds,
    and the files of a commit cut short are removed by the next commit (indexing/shard_writer.py). The job is
    marked `failed` here first, so that the same command or POST /jobs/{id}/retry runs it again."""
    run = IngestRun(total=total)
    stop = GracefulStop("stopping after this batch; what is stored stays searchable")
    pending = iter(batches)
    # Held while a job is recorded and named in run.job_ids, and while an interrupt marks the last one failed:
    # no job is recorded after that (stop.requested is set by then), and none recorded is missed by it.
    recording = threading.Lock()

    def run_all() -> None:
        while not stop.requested and (batch := _next(pending, run)) is not None:
            with recording:
                if stop.requested:  # Ctrl-C while the input was read: this job is not recorded
                    break
                job_id = _record(state, coll, batch, worker, run)
                if job_id is None:
                    break
                run.job_ids.append(job_id)
            size = len(batch)
            batch.clear()  # the job reads its documents back from the store: one copy in memory, not two
            # Through tqdm, so that the line does not tear the bar.
            tqdm.write(
                f"job {job_id}: documents {run.done + 1} to {run.done + size} of {total} into {coll.name!r}",
                file=sys.stderr,
            )

            def advance(done: int, _total: int, base: int = run.done, job: str = job_id) -> None:
                bar(base + done, total)
                if stop.requested:  # the job stops at its next batch, as a cancel through the API would stop it
                    state.jobs.request_cancel(job)

            # The same job runner as a server's queue: with `ray`, run_job hands the upsert to Ray Data.
            status = run_job(
                job_id=job_id,
                jobs=state.jobs,
                collections=state.collections,
                embedders=state.embedders,
                batch_size=batch_size,
                on_progress=advance,
                worker=worker,
                ray=ray,
                metadata_limits=state.settings.metadata_limits(),  # a server's patch it runs first
            )
            if status != JobStatus.SUCCEEDED:  # the run ends with the job that did not succeed
                final = state.jobs.get(job_id)
                run.status, run.error, run.done = status, final.error, run.done + final.done
                return
            run.done += size

    # Closed at the last document: the last job's commit after it would otherwise print the bar again, later.
    with stop, DocumentBar(f"ingest {coll.name}", total=total) as bar, renewing(state.jobs):
        try:
            run_off_main_thread(run_all, name="vela-ingest-jobs")
        except KeyboardInterrupt:  # stopped mid-batch: failed, so that POST /jobs/{id}/retry can finish it
            with recording:
                last = run.job_ids[-1] if run.job_ids else None
                # A job that had ended already (the interrupt came between two jobs) keeps its status.
                if last is not None and state.jobs.finish(last, JobStatus.FAILED, error=INTERRUPTED):
                    run.failed_job = last
            run.status, run.interrupted = JobStatus.FAILED, True
            bar.close()  # the worker thread, still running, draws no more of it
    run.stopped = stop.requested
    if run.status == JobStatus.SUCCEEDED and run.problem is not None:
        run.status = JobStatus.FAILED
    elif run.status == JobStatus.SUCCEEDED and run.stopped and run.done < total:  # the next job was not recorded
        run.status = JobStatus.CANCELLED
    return run
