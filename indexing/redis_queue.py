"""The production job queue: a Redis stream with a consumer group.

The API adds job ids to the stream; each `vela worker` reads new entries with XREADGROUP and, before that,
takes over entries that another consumer left pending for longer than `claim_idle_s` (XAUTOCLAIM): a worker
killed mid-job leaves its entry pending, and the next free worker runs the job again (at-least-once; jobs are
idempotent). A worker busy with a long job re-claims its own entry on every batch, which resets the entry's
idle time, so only a silent (dead or stuck) worker loses its job. An entry is acknowledged after the job ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

log = logging.getLogger("vela.queue")
GROUP = "vela-workers"


class RedisJobQueue:
    """Producer side (the API): the same submit/start/stop as the in-process queue."""

    def __init__(self, url: str, *, stream: str = "vela:jobs") -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.stream = stream

    def start(self) -> None:
        ensure_group(self.client, self.stream)

    def submit(self, job_id: str) -> None:
        self.client.xadd(self.stream, {"job_id": job_id})

    def stop(self, timeout: float = 0.0) -> None:
        self.client.close()


def ensure_group(client: redis.Redis, stream: str) -> None:
    try:
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


class RedisWorker:
    """Consumer side: runs one job at a time with `run(job_id, heartbeat)` until `stop` is set."""

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
    ) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.run = run
        self.name = name
        self.stream = stream
        self.claim_idle_ms = int(claim_idle_s * 1000)
        self.block_ms = int(block_s * 1000)
        self.alive_file = alive_file

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
            log.warning("took over a stalled job", extra={"entry": entry_id, "job_id": fields.get("job_id")})
            return str(entry_id), str(fields["job_id"])
        got: Any = self.client.xreadgroup(GROUP, self.name, {self.stream: ">"}, count=1, block=self.block_ms)
        if not got:
            return None
        entry_id, fields = got[0][1][0]  # [[stream, [(id, fields)]]]
        return str(entry_id), str(fields["job_id"])

    def serve(self, stop: threading.Event) -> None:
        ensure_group(self.client, self.stream)
        # Registered up front (XREADGROUP alone creates a consumer only once it gets an entry on some Redis
        # versions), so XINFO CONSUMERS lists every live worker from the start.
        self.client.xgroup_createconsumer(self.stream, GROUP, self.name)
        log.info("worker ready", extra={"worker": self.name, "stream": self.stream})
        while not stop.is_set():
            self.touch()
            entry = self.next_entry()
            if entry is None:
                continue
            entry_id, job_id = entry

            def heartbeat(entry_id: str = entry_id) -> None:
                # Re-claiming our own entry resets its idle time: we are alive, keep the job.
                self.client.xclaim(self.stream, GROUP, self.name, 0, [entry_id], justid=True)
                self.touch()

            log.info("job started", extra={"worker": self.name, "job_id": job_id})
            self.run(job_id, heartbeat)
            self.client.xack(self.stream, GROUP, entry_id)
            log.info("job done", extra={"worker": self.name, "job_id": job_id})
