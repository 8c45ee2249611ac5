"""The embedded queue when several API processes share one data directory (`vela serve --processes N`).

Jobs must run in one place at a time: two processes running the same ingest job would each commit it. So one
process, the job runner, holds an exclusive lock on `<data dir>/jobs.lock` and runs every job in its lanes
(indexing/lanes.py); the others only record jobs in the job store (the route does that before `submit`), and
the runner finds them there within `poll_s`. The kernel releases the lock when its holder dies: another
process takes it on its next poll, runs the maintenance a start-up runs (`on_lead`), and runs again what was
left unfinished, as after a crash (at-least-once; jobs are idempotent).

Stopping: once a process is told to stop (`stop_starting`, from its SIGTERM handler), it takes no lock and starts
no job, though it may go on serving requests for a while (uvicorn drains open connections before the app's
shutdown): the runner that exits meanwhile must not hand its queued jobs to a process that is about to be killed.
The lock is released only when the job thread has ended: a job still running at the end of `stop` keeps it until it
ends, or until the process exits (the kernel releases it then), so no other process runs that job beside it.
"""

from __future__ import annotations

import fcntl
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from indexing.jobs import JobStore
from indexing.lanes import LaneQueue

log = logging.getLogger("vela.queue")
POLL_S = 0.1  # how soon the runner sees a job another process recorded, and a process sees the runner gone


class SharedLaneQueue:
    """LaneQueue's interface (start, submit, join, stop) for one of several processes."""

    def __init__(
        self,
        jobs: JobStore,
        run: Callable[[str], object],
        lock_path: Path,
        *,
        on_lead: Callable[[], None] | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self.jobs = jobs
        self._job = run
        self.lanes = LaneQueue(jobs, self._run)
        self.lock_path = lock_path
        self.on_lead = on_lead  # start-up maintenance: done by the process that runs jobs, when it starts to
        self.poll_s = poll_s
        self._lock_file: IO[str] | None = None
        self._seen: set[str] = set()  # unfinished jobs already handed to the lanes
        self._seen_lock = threading.Lock()
        self._hand_lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="vela-job-runner", daemon=True)

    def _run(self, job_id: str) -> object:
        """Run the job; once it has run it is no longer one handed over, so that a retry of it (queued again, maybe
        before any poll) is handed to the lanes again rather than taken for one they already hold."""
        try:
            return self._job(job_id)
        finally:
            with self._seen_lock:
                self._seen.discard(job_id)

    @property
    def leading(self) -> bool:
        return self._lock_file is not None

    def try_lead(self) -> bool:
        """Take the runner's lock if nobody holds it; then run the maintenance and start the lanes."""
        if self.leading:
            return True
        if self._stop.is_set():  # stopping: the jobs wait for a process that is staying
            return False
        fh = open(self.lock_path, "a+")  # noqa: SIM115  (held open while this process runs jobs)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return False
        if self._stop.is_set():  # told to stop while it took the lock: give it back untouched
            fh.close()
            return False
        self._lock_file = fh
        log.info("running jobs", extra={"lock": str(self.lock_path)})
        if self.on_lead is not None:
            self.on_lead()
        with self._seen_lock:
            self._seen = set(self.jobs.unfinished())  # the lanes queue these themselves as they start
        self.lanes.start()
        return True

    def start(self) -> None:
        self.try_lead()
        self._thread.start()

    def submit(self, job_id: str) -> None:
        """A job this process recorded: run it here when this process is the runner, else the runner's poll
        finds it in the job store. The runner hands the lanes every job it has not seen yet, oldest first, not
        this one alone: a write another process recorded just before (its client already had the 202) would
        otherwise wait for the next poll and run after this newer one, which it must precede."""
        if not self.leading or self._stop.is_set():  # stopping: it stays queued for the next runner
            return
        with self._hand_lock:
            self._poll()
            with self._seen_lock:  # already handed over, by this poll or an earlier one
                if job_id in self._seen:
                    return
                self._seen.add(job_id)
            self.lanes.submit(job_id)

    def join(self) -> None:
        self.lanes.join()

    def stop_starting(self) -> None:
        """From now on take no lock and start no job; a job that runs now goes on. Called from the SIGTERM handler
        (service/server.py), so it only sets events that the main thread never waits on (see
        InProcessQueue.stop_starting)."""
        self.lanes.stop_starting()
        self._stop.set()  # ends the poll loop too: nothing is taken or handed over any more

    def stop(self, timeout: float = 30.0) -> None:
        """Stop polling and let the running job end, up to `timeout`; then give the lock back. A job still running
        keeps the lock until its thread ends (or this process exits): released now, another process would take
        the lock and run that job again beside it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if not self.leading:
            return
        self.lanes.stop(timeout)
        if not self.lanes.running():
            self._release()
            return
        log.warning("a job still runs at stop: the job lock is kept until it ends", extra={"timeout_s": timeout})
        threading.Thread(target=self._release_after_lanes, name="vela-job-lock", daemon=True).start()

    def _release_after_lanes(self) -> None:
        self.lanes.wait_stopped(None)
        self._release()

    def _release(self) -> None:
        with self._hand_lock:
            if self._lock_file is not None:
                self._lock_file.close()  # releases the lock: another process runs the jobs from now
                self._lock_file = None

    def _poll(self) -> None:
        if not self.leading:
            self.try_lead()
            return
        with self._hand_lock:  # the poll thread and `submit` hand jobs over one at a time, each batch in order
            with self._seen_lock:
                before = set(self._seen)
            unfinished = self.jobs.unfinished()  # oldest first
            queued = self.jobs.queued()
            with self._seen_lock:
                # Not one running elsewhere (a `vela ingest` or `vela reindex` runs its own): the jobs a crash
                # left running are run again when a process takes the lead (try_lead), not on a poll.
                new = [j for j in unfinished if j not in self._seen and j in queued]
                # Jobs finished by now leave the set, which stays as small as the backlog; one `submit` added
                # while the store was read is kept (it may be missing from `unfinished` only because it is that new).
                self._seen = (self._seen - (before - set(unfinished))) | set(new)
            for job_id in new:
                self.lanes.submit(job_id)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self._poll()
            except Exception:  # a busy or briefly unreadable job store: the next poll tries again
                log.exception("job poll failed")
