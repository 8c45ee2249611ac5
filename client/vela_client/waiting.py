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


def check_wait_options(
    *, wait: bool = True, on_progress: object = None, timeout: float | None = None, poll_interval: float | None = None
) -> None:
    """Raise ValueError for waiting options that cannot apply. The write methods call it before they send anything,
    so that a bad argument never leaves a job behind."""
    given = [name for name, value in (("on_progress", on_progress), ("timeout", timeout)) if value is not None]
    if not wait and given:  # named as given: index_in_batches takes on_progress without wait, not a timeout
        raise ValueError(f"{' and '.join(given)} appl{'y' if len(given) > 1 else 'ies'} only with wait=True")
    if timeout is not None and not timeout >= 0:  # NaN too
        raise ValueError(f"timeout must be 0 or more seconds, not {timeout!r}")
    if poll_interval is not None and not poll_interval > 0:
        raise ValueError(f"poll_interval must be positive, not {poll_interval!r}")


class JobWatch:
    """The clock and memory of one wait: which state was reported last, when to poll next, when to give up."""

    def __init__(self, *, timeout: float | None, poll_interval: float) -> None:
        check_wait_options(timeout=timeout, poll_interval=poll_interval)
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
        # The exponent stops growing once the doubling has passed any interval (2.0**1024 overflows a float).
        delay: float = min(self._poll_interval, _FIRST_POLL_S * 2.0 ** min(self._polls, 64))
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
