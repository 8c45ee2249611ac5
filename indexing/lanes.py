"""The embedded default's queue with two lanes: long jobs (a reindex embeds a whole collection again, for minutes or
hours; a restore rebuilds a whole index) run on a thread of their own, so that writes submitted meanwhile run at
once, beside them (a reindex's new generation catches up with them), instead of waiting behind them."""

from __future__ import annotations

import time
from collections.abc import Callable

from indexing.jobs import LONG_KINDS, JobNotFound, JobStore
from indexing.queue import InProcessQueue


class _Lane(InProcessQueue):
    def __init__(self, jobs: JobStore, run: Callable[[str], object], generations: bool) -> None:
        super().__init__(jobs, run)
        self.generations = generations

    def takes(self, job_id: str) -> bool:
        """Jobs a crash interrupted, and jobs whose runner is gone, run again each in its own lane (InProcessQueue's
        start and sweep ask this)."""
        try:
            return (self.jobs.get(job_id).kind in LONG_KINDS) == self.generations
        except JobNotFound:
            return not self.generations


class LaneQueue:
    """InProcessQueue's interface (start, submit, join, stop) over the two lanes."""

    def __init__(self, jobs: JobStore, run: Callable[[str], object]) -> None:
        self.jobs = jobs
        self.writes = _Lane(jobs, run, generations=False)
        self.generations = _Lane(jobs, run, generations=True)
        self.generations._thread.name = "vela-generations"

    def start(self) -> None:
        self.writes.start()
        self.generations.start()

    def submit(self, job_id: str) -> None:
        (self.generations if self.generations.takes(job_id) else self.writes).submit(job_id)

    def join(self) -> None:
        self.writes.join()
        self.generations.join()

    def stop_starting(self) -> None:
        """Neither lane starts a job from now on (safe in a signal handler: InProcessQueue.stop_starting)."""
        for lane in (self.writes, self.generations):
            lane.stop_starting()

    def stop(self, timeout: float = 30.0) -> None:
        """Both lanes stop after their running job, within one `timeout` in all (not one each); a job that runs
        past it goes on (see `running`)."""
        deadline = time.monotonic() + timeout
        for lane in (self.writes, self.generations):
            lane.request_stop()
        for lane in (self.writes, self.generations):
            lane.wait_stopped(max(0.0, deadline - time.monotonic()))

    def wait_stopped(self, timeout: float | None) -> None:
        """Wait for both lanes' threads to end (after `stop`), up to `timeout` each; None: as long as they run."""
        for lane in (self.writes, self.generations):
            lane.wait_stopped(timeout)

    def running(self) -> bool:
        """Whether a lane's thread is still alive (its job runs on)."""
        return self.writes.running() or self.generations.running()
