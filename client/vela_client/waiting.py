"""Following a job until it ends (shared by the sync and async clients, which only sleep differently)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from vela_client.errors import JobFailed, JobWaitTimeout
from vela_client.models import Job, JobAccepted

# Called with each new state of the job (status or progress changed), the first and the last included.
ProgressCallback = Callable[[Job], object]
# The async client also takes a coroutine function.
AsyncProgressCallback = Callable[[Job], object | Awaitable[object]]
JobRef = str | Job | JobAccepted

# The first polls come quickly (a small job is done in a fraction of a second), then every `poll_interval`.
_FIRST_POLL_S = 0.05


def job_id_of(job: JobRef) -> str:
    if isinstance(job, Job):
        return job.id
    if isinstance(job, JobAccepted):
        return job.job_id
    return job


class JobWatch:
    """The clock and memory of one wait: which state was reported last, when to poll next, when to give up."""

    def __init__(self, *, timeout: float | None, poll_interval: float) -> None:
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must not be negative")
        self._timeout = timeout
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._poll_interval = poll_interval
        self._polls = 0
        self._last: tuple[str, int, int] | None = None

    def changed(self, job: Job) -> bool:
        """Whether this state differs from the last one seen (so it is reported)."""
        key = (job.status, job.done, job.total)
        changed, self._last = key != self._last, key
        return changed

    def next_delay(self, job: Job) -> float:
        """Seconds to sleep before the next poll; raises JobWaitTimeout once the deadline has passed."""
        delay: float = min(self._poll_interval, _FIRST_POLL_S * 2.0**self._polls)
        self._polls += 1
        if self._deadline is not None:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                assert self._timeout is not None
                raise JobWaitTimeout(job, self._timeout)
            delay = min(delay, remaining)
        return delay


def finished(job: Job, *, check: bool) -> Job:
    """The final state of a waited-on job; with `check`, a job that did not succeed raises JobFailed."""
    if check and not job.succeeded:
        raise JobFailed(job)
    return job
