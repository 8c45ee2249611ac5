"""The production job queue: a Redis stream with a consumer group.

The API adds job ids to the stream; each `vela worker` (indexing/redis_worker.py) reads new entries with XREADGROUP
and, before that, takes over entries that another consumer left pending for longer than `claim_idle_s` (XAUTOCLAIM):
a worker killed mid-job leaves its entry pending, and the next free worker runs the job again (at-least-once; jobs
are idempotent). A worker busy with a long job re-claims its own entry on every batch, which resets the entry's idle
time, so only a silent (dead or stuck) worker loses its job. An entry is acknowledged and deleted (XACK and XDEL in
one transaction) after the job ends, so the stream holds only the jobs not yet done: an entry is never deleted while
it is pending, which is what a takeover reads.

Redis going away is survived on both sides. The API marks a job it could not add to the stream failed and raises
QueueUnavailable (the request is answered 503 and sent again by the client): a write the server could not queue
never runs later, after newer ones. A worker logs the outage and reconnects with capped exponential backoff.

Redis losing entries is survived too (restarted without persistence, or an `appendfsync everysec` AOF losing its
last second): `requeue_lost` adds again every job the job store holds as queued that no entry names. The API runs
it as it starts, and the workers every REQUEUE_EVERY_S and at once when they had to make the group again. In the
same look the workers queue again the running jobs whose worker died and whose entry Redis lost with it
(`requeue_abandoned`): a worker leases the jobs it runs in the job store (indexing/job_leases.py).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.retry import Retry

from indexing.jobs import JobNotFound, JobStore
from indexing.queue import QueueUnavailable

log = logging.getLogger("vela.queue")
GROUP = "vela-workers"
# What a failed job says when the API could not hand it to Redis (GET /jobs/{id} shows it).
NOT_QUEUED = "the job queue could not be reached ({error}); nothing was written: send the request again"
PROBE_TIMEOUT_S = 0.5  # the readiness probe's PING: connect and answer within this, or the queue is unreachable
RETRY_AFTER_S = 5  # what a client is told to wait before sending a write the queue could not take
REQUEUE_EVERY_S = 30.0  # how often the workers look for queued jobs the stream lost (one of them per period)
STREAM_PAGE = 1000  # stream entries read per XRANGE while looking for the job ids it holds


def redis_client(url: str, *, timeout_s: float, retries: int, backoff_cap_s: float = 0.25) -> redis.Redis:
    """A client that fails within bounded time: `retries` quick reconnects (a pooled connection is stale after a
    Redis restart; a fresh one then succeeds) and socket timeouts, so that a Redis that is down or hangs is an
    error, not a hung thread."""
    backoff = ExponentialWithJitterBackoff(base=0.01, cap=backoff_cap_s) if backoff_cap_s > 0 else NoBackoff()
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=min(timeout_s, 5.0),
        socket_timeout=timeout_s,
        retry=Retry(backoff, retries),
    )


class RedisJobQueue:
    """Producer side (the API): the same submit/start/stop as the in-process queue.

    `jobs` is the job store the jobs are recorded in: a job that could not be added to the stream is marked failed
    there before `submit` raises QueueUnavailable."""

    def __init__(self, url: str, *, stream: str = "vela:jobs", jobs: JobStore | None = None) -> None:
        # A write waits for Redis a few seconds at most (three tries) before it is refused with 503.
        self.client = redis_client(url, timeout_s=3.0, retries=2)
        self._probe = redis_client(url, timeout_s=PROBE_TIMEOUT_S, retries=1, backoff_cap_s=0)
        self._probe_lock = threading.Lock()
        self._reachable = True
        self.stream = stream
        self.jobs = jobs

    def start(self) -> None:
        ensure_group(self.client, self.stream)

    def submit(self, job_id: str) -> None:
        """Add a job just recorded (or requeued) to the stream. When Redis cannot be reached the job is marked
        failed, so that nothing (the start-up hand-over, a worker reading an entry whose reply was lost) runs it
        later, and QueueUnavailable is raised."""
        try:
            self.resubmit(job_id)
        except redis.RedisError as exc:
            if self._fail_unqueued(job_id, exc):
                raise QueueUnavailable(
                    "the job queue is unreachable: nothing was written; send the request again",
                    job_id=job_id,
                    retry_after_s=RETRY_AFTER_S,
                ) from exc

    def resubmit(self, job_id: str) -> None:
        """XADD alone, its errors raised as they are."""
        self.client.xadd(self.stream, {"job_id": job_id})

    def hand_over(self) -> list[str]:
        """The API's start-up: the jobs recorded as queued that the stream does not hold (the API died between
        recording a job and its XADD, or Redis lost the entry) are added again; `requeue_lost`. Redis errors are
        raised as they are (the start-up stops; the process is started again): these jobs stay queued, never failed.
        A job the API could not hand over while it ran is not among them: `submit` failed it and the client was told
        to send it again."""
        if self.jobs is None:
            return []
        return requeue_lost(self.client, self.stream, self.jobs, queued_for_s=0.0)

    def _fail_unqueued(self, job_id: str, exc: redis.RedisError) -> bool:
        """Mark the job failed unless a worker already took it; True when it was (the caller raises). One
        conditional update: a worker that started the job first keeps it (its XADD reached Redis and only the reply
        was lost), and a worker reading the entry after it skips the ended job."""
        log.error("job queue unreachable: job not queued", extra={"job_id": job_id, "error": str(exc)})
        if self.jobs is None:
            return True
        if self.jobs.fail_if_queued(job_id, NOT_QUEUED.format(error=type(exc).__name__)):
            return True
        try:
            status = self.jobs.get(job_id).status
        except JobNotFound:
            return True
        log.warning("job queued after all: a worker took it", extra={"job_id": job_id, "status": status})
        return False

    def reachable(self) -> bool:
        """Whether Redis answers a PING within PROBE_TIMEOUT_S (the readiness probe). Probes that come while one
        is under way get its last answer instead of waiting for Redis in their turn."""
        if not self._probe_lock.acquire(blocking=False):
            return self._reachable
        try:
            try:
                self._reachable = bool(self._probe.ping())
            except redis.RedisError:
                self._reachable = False
            return self._reachable
        finally:
            self._probe_lock.release()

    def stop(self, timeout: float = 0.0) -> None:
        self.client.close()
        self._probe.close()


def ensure_group(client: redis.Redis, stream: str) -> bool:
    """The consumer group (and the stream), made unless there; True when this call made it: a first start, or
    Redis came back without its data."""
    try:
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
        return False
    return True


def stream_job_ids(client: redis.Redis, stream: str) -> set[str]:
    """The job ids the stream's entries name: waiting, pending (delivered, not yet acknowledged) or both. The stream
    holds only the jobs not yet done (entries are deleted as their jobs end), so this is a short read."""
    ids: set[str] = set()
    start = "-"
    while True:
        page: Any = client.xrange(stream, min=start, max="+", count=STREAM_PAGE)
        ids.update(str(fields["job_id"]) for _, fields in page if fields and "job_id" in fields)
        if len(page) < STREAM_PAGE:
            return ids
        start = _after(str(page[-1][0]))


def requeue_lost(client: redis.Redis, stream: str, jobs: JobStore, *, queued_for_s: float) -> list[str]:
    """Add to the stream again every job the job store holds as queued, recorded at least `queued_for_s` ago, that
    no entry names; their ids, oldest first. Such a job was accepted (202) and would otherwise never run: Redis lost
    its entry (restarted without persistence, or an `appendfsync everysec` AOF that lost its last second), or the
    API died between recording it and its XADD.

    The job store is read before the stream, so none is missed: a job whose entry is read, run and deleted in
    between is added again, and the worker that reads that entry finds the job ended and skips it. Duplicates are
    harmless (jobs are at-least-once and idempotent); `queued_for_s` keeps the workers from adding a job whose own
    XADD is still on its way."""
    queued = jobs.queued_before(time.time() - queued_for_s)
    if not queued:
        return []
    named = stream_job_ids(client, stream)
    lost = [job_id for job_id in queued if job_id not in named]
    for job_id in lost:
        client.xadd(stream, {"job_id": job_id})
    if lost:
        log.warning(
            "queued jobs the job queue did not hold: added again",
            extra={"stream": stream, "count": len(lost), "job_ids": lost[:20]},
        )
    return lost


def requeue_abandoned(client: redis.Redis, stream: str, jobs: JobStore) -> list[str]:
    """Queue again, and add to the stream, every running job whose lease expired (its worker died: see
    indexing/job_leases.py) that no entry names; their ids, oldest first. Such a job would otherwise stay running
    for ever: its worker is gone and Redis lost the entry a takeover would have claimed (restarted without
    persistence, or an `appendfsync everysec` AOF that lost its last second).

    A job an entry still names is left to the takeover of that entry (XAUTOCLAIM, after the same idle time): a
    second entry could run it twice at once. The job store is read before the stream, and each job is queued again
    by one conditional statement that holds only while it is still running with its lease expired: a job that
    ended, or whose worker renewed the lease (it was alive after all), in between is left alone. A live worker
    renews its leases in the job store, not in Redis, so losing Redis never makes its job look abandoned."""
    expired = jobs.leases.expired()
    if not expired:
        return []
    named = stream_job_ids(client, stream)
    abandoned = [job_id for job_id in expired if job_id not in named and jobs.leases.requeue_expired(job_id)]
    for job_id in abandoned:
        client.xadd(stream, {"job_id": job_id})  # if this fails the job is queued: `requeue_lost` adds it later
    if abandoned:
        log.warning(
            "running jobs whose worker is gone: queued again",
            extra={"stream": stream, "count": len(abandoned), "job_ids": abandoned[:20]},
        )
    return abandoned


def _after(entry_id: str) -> str:
    """The smallest stream id above `entry_id`."""
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


def trim_acknowledged(client: redis.Redis, stream: str) -> int:
    """Delete the entries the workers are done with; returns how many. Entries are deleted one by one as their jobs
    end; this removes what that left behind (a stream written before that, or by an older worker).

    Bound: the oldest pending entry, or, with none pending, the entry after the group's last delivered one. Every
    entry below it was delivered and is no longer pending, so it was acknowledged; an entry becomes pending only
    when first delivered (above the last delivered id) and a takeover only moves entries already pending, so no
    entry below the bound can be needed again. Both are read in one MULTI. Nothing is trimmed when another
    consumer group reads the stream too."""
    pipe = client.pipeline(transaction=True)
    pipe.xinfo_groups(stream)
    pipe.xpending(stream, GROUP)
    groups, pending = pipe.execute()
    if len(groups) != 1 or groups[0]["name"] != GROUP:
        return 0
    bound = str(pending["min"]) if pending["pending"] else _after(str(groups[0]["last-delivered-id"]))
    return int(client.xtrim(stream, minid=bound, approximate=False))
