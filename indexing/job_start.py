"""Starting a job that another worker may be starting or running too.

A job can reach two workers at once: its own worker takes its stream entry while another runs it first as an older
write of the collection (indexing/write_order.py), an entry is delivered twice, or a takeover finds the worker it
replaces alive after all. `JobStore.start` is one conditional update, so only one of them marks it running; the
other waits here until that run ends (then it skips the job) or its lease expires (its worker died: it runs the job
itself). A job is never run twice at once while its worker is alive.
"""

from __future__ import annotations

import logging
import time

from indexing.jobs import Job, JobStore

log = logging.getLogger("vela.ingest")

POLL_S = 0.1  # how often a waiting worker looks at the job again


def start_when_free(jobs: JobStore, job_id: str, worker: str, *, poll_s: float = POLL_S) -> Job:
    """Start the job here once no other live run holds it; the job as it then is (ended: nothing left to run)."""
    waited = False
    while (job := jobs.start(job_id, worker)) is None:
        if not waited:
            waited = True
            log.info(
                "job runs on another worker: waiting for it to end",
                extra={"job_id": job_id, "worker": worker, "running_on": jobs.worker(job_id)},
            )
        time.sleep(poll_s)
    return job
