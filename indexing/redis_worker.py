"""The consumer side of the Redis job queue (indexing/redis_queue.py): a `vela worker` process's loop.

It takes over entries another consumer left pending too long (XAUTOCLAIM), else reads new ones (XREADGROUP), runs
one job at a time, re-claims its own entry on every batch as a heartbeat, and acknowledges and deletes the entry
once the job ended. When Redis goes away it logs the outage and reconnects with capped exponential backoff. Between
jobs it adds again the queued jobs whose entries Redis lost (`requeue_lost`), and queues again the running jobs
whose worker died and whose entries Redis lost (`requeue_abandoned`). While it runs a job it renews the leases of
the jobs it runs in the job store (indexing/job_leases.py), which is how the others know it is alive.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from indexing.jobs import JobStore
from indexing.redis_queue import (
    GROUP,
    REQUEUE_EVERY_S,
    ensure_group,
    log,
    redis_client,
    requeue_abandoned,
    requeue_lost,
    trim_acknowledged,
)


class RedisWorker:
    """Consumer side: runs one job at a time with `run(job_id, heartbeat)` until `stop` is set.

    When Redis cannot be reached the worker logs it, waits (`reconnect_first_s`, doubling up to `reconnect_max_s`,
    with jitter) and tries again until it answers; `stop` ends the wait at once.

    With `jobs` (the job store the API records jobs in), the worker adds again to the stream the jobs queued for
    longer than `requeue_every_s` that no entry names (Redis lost them): every `requeue_every_s`, taking turns with
    the other workers (one pass per period among them), and at once, whatever their age, when it had to make the
    consumer group again (Redis came back empty). In the same pass it queues again the running jobs whose lease
    expired and that no entry names (`requeue_abandoned`). A store made with `lease_s` leases the jobs this worker
    starts, and the worker renews their leases every third of `lease_s` while it runs them."""

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
        jobs: JobStore | None = None,
        requeue_every_s: float = REQUEUE_EVERY_S,
    ) -> None:
        # The socket waits longer than XREADGROUP's BLOCK, which is not an error.
        self.client = redis_client(url, timeout_s=block_s + 10.0, retries=2)
        self.run = run
        self.name = name
        self.stream = stream
        self.claim_idle_ms = int(claim_idle_s * 1000)
        self.block_ms = int(block_s * 1000)
        self.alive_file = alive_file
        self.reconnect_first_s = reconnect_first_s
        self.reconnect_max_s = reconnect_max_s
        self._unacked: list[str] = []  # entries whose job ended, acknowledged once Redis answers
        self.jobs = jobs
        self.requeue_every_s = requeue_every_s
        self._requeue_at = 0.0  # monotonic time of the next look for lost jobs: at once after registering
        self._group_made = False  # this worker made the group: Redis came back empty, every queued job is lost

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
        if not got or not got[0][1]:  # nothing; or woken by an entry deleted before the reply (its job is requeued)
            return None
        entry_id, fields = got[0][1][0]  # [[stream, [(id, fields)]]]
        if not fields or "job_id" not in fields:
            self._unacked.append(str(entry_id))
            return None
        return str(entry_id), str(fields["job_id"])

    def register(self) -> None:
        """The group (made again if Redis came back without it) and this consumer, then the stream trimmed; a look
        for lost jobs is due at once."""
        self._group_made = ensure_group(self.client, self.stream) or self._group_made  # kept until a look uses it
        self._requeue_at = 0.0
        # Registered up front (XREADGROUP alone creates a consumer only once it gets an entry on some Redis
        # versions), so XINFO CONSUMERS lists every live worker from the start.
        self.client.xgroup_createconsumer(self.stream, GROUP, self.name)
        trimmed = trim_acknowledged(self.client, self.stream)
        if trimmed:
            log.info("stream trimmed", extra={"worker": self.name, "stream": self.stream, "deleted": trimmed})

    def requeue(self) -> list[str]:
        """When due: the running jobs whose worker is gone queued again (`requeue_abandoned`), the jobs queued for
        longer than requeue_every_s that no entry names added again (`requeue_lost`), and every queued job that no
        entry names when this worker made the group again. One pass per period among the workers (a key
        `<stream>:requeue` set with NX for that long), so that a lost job is not added once by each of them.
        Returns what was added."""
        if self.jobs is None or time.monotonic() < self._requeue_at:
            return []
        self._requeue_at = time.monotonic() + self.requeue_every_s
        everything_lost, self._group_made = self._group_made, False
        period_ms = max(1, int(self.requeue_every_s * 1000))
        if not everything_lost and not self.client.set(f"{self.stream}:requeue", self.name, nx=True, px=period_ms):
            return []  # another worker looks in this period
        try:
            # Running jobs first: one queued again here is then in the stream when requeue_lost reads it.
            abandoned = requeue_abandoned(self.client, self.stream, self.jobs)
            return abandoned + requeue_lost(
                self.client, self.stream, self.jobs, queued_for_s=0.0 if everything_lost else self.requeue_every_s
            )
        except (redis.ConnectionError, redis.TimeoutError):
            raise  # the worker reconnects, and looks again once registered
        except Exception:  # a busy or briefly unreadable job store, a refused command: the next period looks again
            log.exception("look for lost jobs failed", extra={"worker": self.name})
            return []

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
                self.requeue()
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
                # NOGROUP: Redis came back without the stream (no persistence); UNBLOCKED: the stream went (FLUSHALL,
                # DEL) under a blocked XREADGROUP. Either way the group is made again, and the queued jobs the
                # stream held are added again (`requeue`).
                if "NOGROUP" not in str(exc) and "UNBLOCKED" not in str(exc):
                    raise
                log.warning("job queue lost its consumer group: creating it again", extra={"worker": self.name})
                registered = False
        log.info("worker stopped", extra={"worker": self.name})

    def backoff(self, failures: int) -> float:
        """The wait before reconnect attempt `failures` + 1: doubling from reconnect_first_s, capped at
        reconnect_max_s, then between half and all of that (workers that lost Redis together do not all come
        back at the same instant)."""
        delay = min(self.reconnect_max_s, self.reconnect_first_s * 2 ** min(failures - 1, 30))
        return delay * random.uniform(0.5, 1.0)

    def renew_leases(self) -> None:
        """Renew the leases of the jobs this worker runs (the one its entry names, and an older write of the same
        collection it runs first). A job store that cannot be written now (busy) is tried again at the next beat, a
        third of the lease later; the job itself goes on."""
        if self.jobs is None:
            return
        try:
            self.jobs.leases.renew()
        except sqlite3.Error as exc:
            log.warning("job leases not renewed", extra={"worker": self.name, "error": str(exc)})

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
        # Beside the job's own beats (one per batch), a beat every third of the claim time, so that a live worker
        # keeps its job through a batch longer than that, or a wait for the collection's writer lock.
        done = threading.Event()
        beats = [threading.Thread(target=_beat_until, args=(done, heartbeat, self.claim_idle_ms / 3000), daemon=True)]
        lease_s = None if self.jobs is None else self.jobs.leases.lease_s
        if lease_s is not None:
            # The leases on a thread of their own, which never waits for Redis: a Redis that hangs holds the
            # heartbeat above for up to its timeouts and retries, longer than a short lease.
            renew = threading.Thread(target=_beat_until, args=(done, self.renew_leases, lease_s / 3), daemon=True)
            beats.append(renew)
        for beat in beats:
            beat.start()
        try:
            self.run(job_id, heartbeat)
        finally:
            done.set()
            for beat in beats:
                beat.join()
        self._unacked.append(entry_id)
        log.info("job done", extra={"worker": self.name, "job_id": job_id})


def _beat_until(done: threading.Event, heartbeat: Callable[[], None], every_s: float) -> None:
    while not done.wait(every_s):
        heartbeat()
