"""The in-process job queue of the embedded default: one worker thread, jobs durable in the JobStore."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Protocol

from indexing.jobs import JobStore

log = logging.getLogger("vela.queue")


class RunAgain:
    """Hands a job that crashed outside its own error handling back to the queue after a backoff (1 s, doubling,
    at most MAX_WAIT_S): a job accepted with a 202 runs once the store can be written again, instead of staying
    queued until a restart. A job that has ended by then (another worker ran it) returns at once when it is run."""

    FIRST_WAIT_S = 1.0
    MAX_WAIT_S = 60.0

    def __init__(self, put: Callable[[str], None], stopping: threading.Event) -> None:
        self._put = put
        self._stopping = stopping
        self._waits: dict[str, float] = {}
        self._lock = threading.Lock()

    def later(self, job_id: str, exc: BaseException) -> None:
        """Hand the job back after its next wait. The first crash of a job is logged with its traceback (an error);
        the retries that follow are one warning line each, however long the store stays unwritable."""
        with self._lock:
            first = job_id not in self._waits
            wait = self._waits[job_id] = min(self._waits.get(job_id, self.FIRST_WAIT_S / 2) * 2, self.MAX_WAIT_S)
        if first:
            log.error("job crashed", exc_info=exc, extra={"job_id": job_id})
        log.warning("job will run again", extra={"job_id": job_id, "in_s": wait, "error": str(exc)})
        timer = threading.Timer(wait, self._hand_back, args=(job_id,))
        timer.daemon = True
        timer.start()

    def done(self, job_id: str) -> None:
        with self._lock:
            self._waits.pop(job_id, None)

    def _hand_back(self, job_id: str) -> None:
        if not self._stopping.is_set():  # stopping: the job stays in the store, and runs after the restart
            self._put(job_id)


class QueueUnavailable(RuntimeError):
    """A job could not be handed to the queue (Redis unreachable). The queue raising it has already marked the job
    failed, so nothing runs it later: the request that made it is to be sent again (the API answers 503
    `queue_unavailable` with `Retry-After: retry_after_s`)."""

    def __init__(self, message: str, *, job_id: str, retry_after_s: int = 5) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.retry_after_s = retry_after_s


class JobQueue(Protocol):
    """Where the API hands job ids: in-process by default, a Redis stream in production. `submit` raises
    QueueUnavailable when the job could not be handed over (the job is then failed, never run)."""

    def start(self) -> None: ...

    def submit(self, job_id: str) -> None: ...

    def stop(self, timeout: float = 30.0) -> None: ...


class InProcessQueue:
    """Runs jobs one at a time on a background thread. Jobs left queued or running by a crash are
    picked up again at start (at-least-once; jobs are idempotent). While it waits for work it also looks, every
    `sweep_s`, for running jobs whose lease has expired (indexing/job_leases.py): jobs a `vela ingest` or
    `vela reindex` leased and then stopped renewing, killed outright (SIGKILL, a lost machine). They are queued
    again and run here, from where they stopped, as a `vela worker` takes over such jobs with Redis."""

    SWEEP_S = 10.0

    def __init__(self, jobs: JobStore, run: Callable[[str], object], *, sweep_s: float = SWEEP_S) -> None:
        self.jobs = jobs
        self._run = run
        self._sweep_s = sweep_s
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="vela-ingest", daemon=True)
        self._stopping = threading.Event()
        self._again = RunAgain(self._queue.put, self._stopping)

    def takes(self, job_id: str) -> bool:
        """Whether this queue runs the job (a lane of service/lanes.py takes some kinds only)."""
        return True

    def start(self) -> None:
        # A job another process runs under a live lease (a `vela reindex` or `vela ingest` at work) is left to it:
        # queued here, this thread would wait for it to end, holding up this queue's other jobs and a stop. If that
        # process dies, the lease lapses and the sweep (`_abandoned`) queues the job then.
        held = set(self.jobs.leases.held())
        for job_id in self.jobs.unfinished():
            if job_id not in held and self.takes(job_id):
                self._queue.put(job_id)
        self._thread.start()

    def submit(self, job_id: str) -> None:
        self._queue.put(job_id)

    def join(self) -> None:
        """Wait until every submitted job has run (tests and the eval CLI use it)."""
        self._queue.join()

    def stop(self, timeout: float = 30.0) -> None:
        self.request_stop()
        self.wait_stopped(timeout)

    def stop_starting(self) -> None:
        """Start no job from now on; the one that runs now goes on. Called from a signal handler (service/server.py),
        so it only sets an event that the main thread never waits on: putting the wake-up on the queue could
        deadlock on the queue's mutex, which the interrupted main thread may hold (a route's `submit`)."""
        self._stopping.set()

    def request_stop(self) -> None:
        """Stop after the job that runs now. Jobs still queued are not started: they stay queued in the job store
        and run after the restart (a shutdown used to run the whole backlog first, with the port already closed)."""
        self.stop_starting()
        self._queue.put(None)

    def wait_stopped(self, timeout: float | None) -> None:
        self._thread.join(timeout)

    def running(self) -> bool:
        """Whether the worker thread is alive: started and not yet ended (its job, if any, still runs)."""
        return self._thread.is_alive()

    def _abandoned(self) -> None:
        """Queue again the running jobs whose lease expired (their runner is gone); a store that cannot be read
        now is looked at again at the next sweep."""
        try:  # this queue's kinds only: a lane takes over what it would have run
            found = [j for j in self.jobs.leases.expired() if self.takes(j) and self.jobs.leases.requeue_expired(j)]
        except Exception as exc:  # the job store busy or failing: not this thread's end
            log.warning("expired job leases not looked for", extra={"error": str(exc)})
            return
        if found:
            log.warning("running jobs whose runner is gone: queued again", extra={"job_ids": found[:20]})
        for job_id in found:
            self._queue.put(job_id)

    def _loop(self) -> None:
        while True:
            try:
                job_id = self._queue.get(timeout=self._sweep_s)
            except queue.Empty:
                if not self._stopping.is_set():
                    self._abandoned()
                continue
            if job_id is None or self._stopping.is_set():
                self._queue.task_done()
                return
            try:
                self._run(job_id)
            except Exception as exc:
                # The job could not be started or ended (its store unwritable: a full disk, a read-only or failing
                # filesystem): it is still queued or running in the store, and run again later, not left there.
                self._again.later(job_id, exc)
            else:
                self._again.done(job_id)
            finally:
                self._queue.task_done()
