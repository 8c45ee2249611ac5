"""The production job queue: a Redis stream with a consumer group.

The API adds job ids to the stream; each `vela worker` reads new entries with XREADGROUP and, before that,
takes over entries that another consumer left pending for longer than `claim_idle_s` (XAUTOCLAIM): a worker
killed mid-job leaves its entry pending, and the next free worker runs the job again (at-least-once; jobs are
idempotent). A worker busy with a long job re-claims its own entry on every batch, which resets the entry's
idle time, so only a silent (dead or stuck) worker loses its job. An entry is acknowledged and deleted (XACK and
XDEL in one transaction) after the job ends, so the stream holds only the jobs not yet done: an entry is never
deleted while it is pending, which is what a takeover reads.

Redis going away is survived on both sides. The API marks a job it could not add to the stream failed and raises
QueueUnavailable (the request is answered 503 and sent again by the client): a write the server could not queue
never runs later, after newer ones. A worker logs the outage and reconnects with capped exponential backoff.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
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


def _client(url: str, *, timeout_s: float, retries: int, backoff_cap_s: float = 0.25) -> redis.Redis:
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
        self.client = _client(url, timeout_s=3.0, retries=2)
        self._probe = _client(url, timeout_s=PROBE_TIMEOUT_S, retries=1, backoff_cap_s=0)
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
        """XADD alone, its errors raised as they are: for a job that must stay queued whatever happens (the API's
        start-up hands over again the jobs recorded as queued; a crash may have come before their XADD)."""
        self.client.xadd(self.stream, {"job_id": job_id})

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


def ensure_group(client: redis.Redis, stream: str) -> None:
    try:
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


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


class RedisWorker:
    """Consumer side: runs one job at a time with `run(job_id, heartbeat)` until `stop` is set.

    When Redis cannot be reached the worker logs it, waits (`reconnect_first_s`, doubling up to `reconnect_max_s`,
    with jitter) and tries again until it answers; `stop` ends the wait at once."""

    def __init__(
        self,
        url: str,
        run: Callable[[str, Callable[[], None]], object],
        *,
        name: str,
        stream: str = "vela:jobs",
        claim_idle_s: float = 60.0,
        block_s: float = 1.0,
        alive_file: Path | None = None,
        reconnect_first_s: float = 0.5,
        reconnect_max_s: float = 30.0,
    ) -> None:
        # The socket waits longer than XREADGROUP's BLOCK, which is not an error.
        self.client = _client(url, timeout_s=block_s + 10.0, retries=2)
        self.run = run
        self.name = name
        self.stream = stream
        self.claim_idle_ms = int(claim_idle_s * 1000)
        self.block_ms = int(block_s * 1000)
        self.alive_file = alive_file
        self.reconnect_first_s = reconnect_first_s
        self.reconnect_max_s = reconnect_max_s
        self._unacked: list[str] = []  # entries whose job ended, acknowledged once Redis answers

    def touch(self) -> None:
        if self.alive_file is not None:
            self.alive_file.touch()

    def next_entry(self) -> tuple[str, str] | None:
        """A stale pending entry of another consumer first, else a new one (blocking up to block_s)."""
        reply: Any = self.client.xautoclaim(
            self.stream, GROUP, self.name, min_idle_time=self.claim_idle_ms, start_id="0-0", count=1
        )
        claimed = reply[1]  # (next start id, [(id, fields)], deleted ids)
        if claimed:
            entry_id, fields = claimed[0]
            if not fields or "job_id" not in fields:  # an entry deleted while pending (never done here)
                self._unacked.append(str(entry_id))
                return None
            log.warning("took over a stalled job", extra={"entry": entry_id, "job_id": fields.get("job_id")})
            return str(entry_id), str(fields["job_id"])
        got: Any = self.client.xreadgroup(GROUP, self.name, {self.stream: ">"}, count=1, block=self.block_ms)
        if not got:
            return None
        entry_id, fields = got[0][1][0]  # [[stream, [(id, fields)]]]
        return str(entry_id), str(fields["job_id"])

    def register(self) -> None:
        """The group (made again if Redis came back without it) and this consumer, then the stream trimmed."""
        ensure_group(self.client, self.stream)
        # Registered up front (XREADGROUP alone creates a consumer only once it gets an entry on some Redis
        # versions), so XINFO CONSUMERS lists every live worker from the start.
        self.client.xgroup_createconsumer(self.stream, GROUP, self.name)
        trimmed = trim_acknowledged(self.client, self.stream)
        if trimmed:
            log.info("stream trimmed", extra={"worker": self.name, "stream": self.stream, "deleted": trimmed})

    def acknowledge(self) -> None:
        """Acknowledge and delete the entries of ended jobs, in one transaction: acknowledged, an entry is no
        longer pending (no takeover can want it), and deleted, the stream does not grow with every job."""
        while self._unacked:
            entry_id = self._unacked[0]
            pipe = self.client.pipeline(transaction=True)
            pipe.xack(self.stream, GROUP, entry_id)
            pipe.xdel(self.stream, entry_id)
            pipe.execute()
            self._unacked.pop(0)

    def serve(self, stop: threading.Event) -> None:
        registered = False
        failures = 0
        down_since: float | None = None
        while not stop.is_set():
            try:
                if not registered:
                    self.register()
                    registered = True
                    if down_since is None:
                        log.info("worker ready", extra={"worker": self.name, "stream": self.stream})
                    else:
                        down_s = round(time.monotonic() - down_since, 1)
                        log.info("job queue reachable again", extra={"worker": self.name, "down_s": down_s})
                        down_since, failures = None, 0
                self.acknowledge()
                self.touch()
                entry = self.next_entry()
                if entry is not None:
                    self._run(*entry)
                    self.acknowledge()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                registered = False
                failures += 1
                if down_since is None:
                    down_since = time.monotonic()
                delay = self.backoff(failures)
                log.warning(
                    "job queue unreachable: reconnecting",
                    extra={
                        "worker": self.name,
                        "attempt": failures,
                        "retry_in_s": round(delay, 2),
                        "error": f"{type(exc).__name__}: {exc}",
                    },
                )
                self.touch()  # alive, waiting for Redis: restarting the process would not bring it back
                stop.wait(delay)  # SIGTERM sets `stop`: the wait ends at once
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                # Redis came back without the stream (no persistence): the group is made again.
                log.warning("job queue lost its consumer group: creating it again", extra={"worker": self.name})
                registered = False
        log.info("worker stopped", extra={"worker": self.name})

    def backoff(self, failures: int) -> float:
        """The wait before reconnect attempt `failures` + 1: doubling from reconnect_first_s, capped at
        reconnect_max_s, then between half and all of that (workers that lost Redis together do not all come
        back at the same instant)."""
        delay = min(self.reconnect_max_s, self.reconnect_first_s * 2 ** min(failures - 1, 30))
        return delay * random.uniform(0.5, 1.0)

    def _run(self, entry_id: str, job_id: str) -> None:
        missed = False

        def heartbeat() -> None:
            # Re-claiming our own entry resets its idle time: we are alive, keep the job. Redis being away does
            # not stop the job: its entry may then be taken over (at-least-once), and this worker's ack waits.
            nonlocal missed
            try:
                self.client.xclaim(self.stream, GROUP, self.name, 0, [entry_id], justid=True)
                missed = False
            except redis.RedisError as exc:
                if not missed:  # once per outage, not once per batch
                    extra = {"worker": self.name, "job_id": job_id, "error": str(exc)}
                    log.warning("heartbeat not sent: job queue unreachable", extra=extra)
                missed = True
            self.touch()

        log.info("job started", extra={"worker": self.name, "job_id": job_id})
        self.run(job_id, heartbeat)
        self._unacked.append(entry_id)
        log.info("job done", extra={"worker": self.name, "job_id": job_id})
