"""Writes to one collection run in the order they were recorded, wherever they run.

One `vela serve` runs its writes on one thread, oldest first; but several `vela worker` processes (or a CLI
ingest beside a server) each take the next job that is free, and two writes sent back to back could take the
collection's writer lock newest first: the older one would then overwrite the newer one. So before a write takes
the lock it lets every older unfinished write of its collection end first: one that nobody has started yet it runs
itself, here (its own worker later finds it ended and skips it); one that runs elsewhere it waits for, and takes
over when it has made no progress for `stall_s` (its worker died: at-least-once, as the queue itself does). Either
way the run goes through `run_job`'s exclusive start (indexing/job_start.py): when the older write's own worker
started it first, or a stalled one's worker still holds a live lease, this worker waits for that run to end
instead of running the write a second time beside it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from indexing.jobs import TERMINAL, Job, JobKind, JobNotFound, JobStatus, JobStore

log = logging.getLogger("vela.ingest")

WRITE_KINDS = frozenset({JobKind.UPSERT, JobKind.DELETE, JobKind.DELETE_BY_FILTER, JobKind.PATCH, JobKind.SCHEMA})
STALL_S = 120.0  # an older write running elsewhere with no progress for this long is taken over
POLL_S = 0.1


def let_older_writes_end(
    job: Job, jobs: JobStore, run_here: Callable[[str], object], *, stall_s: float = STALL_S
) -> None:
    """Return once every write recorded on `job`'s collection before `job` has ended (see the module's text)."""
    if job.kind not in WRITE_KINDS:
        return
    while (older := jobs.older_unfinished(job.id, WRITE_KINDS)) is not None:
        _end(older, jobs, run_here, stall_s)


def _end(job_id: str, jobs: JobStore, run_here: Callable[[str], object], stall_s: float) -> None:
    seen, since = None, time.monotonic()
    while True:
        try:
            job = jobs.get(job_id)
        except JobNotFound:
            return
        if job.status in TERMINAL:
            return
        if job.status == JobStatus.QUEUED or time.monotonic() - since > stall_s:
            log.info("older write run first", extra={"job_id": job_id, "status": job.status.value})
            run_here(job_id)
            return
        if job.done != seen:  # progress: the worker running it is alive
            seen, since = job.done, time.monotonic()
        time.sleep(POLL_S)
