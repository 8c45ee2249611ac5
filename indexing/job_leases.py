"""Job leases: how the workers' look for lost jobs (indexing/redis_queue.py, `requeue_abandoned`) tells a running
job whose worker died from one whose worker is alive, even when Redis has lost the job's stream entry and with it
the pending entry a takeover reads.

A job store made with `lease_s` (a `vela worker`'s) leases every job it starts: the job's row records an owner, a
token of this process (not the worker's name: a restarted container comes back with the same name, and must not
keep its dead predecessor's jobs alive), and an expiry `lease_s` ahead. The worker renews the leases of the jobs it
runs on every heartbeat (each batch, and every third of `lease_s` besides), in the job store rather than in Redis,
so that a Redis outage or restart does not make a live worker's job look abandoned. A running job whose lease has
expired belongs to a worker that is dead (or stuck for that long, which a takeover treats alike). A job started
without a lease (the in-process queue, `vela reindex`) is never taken for abandoned; `vela ingest` leases the jobs
it runs and renews them as a worker does (cli/ingest_run.py).

Expiry times are the wall clock of the host that wrote them, compared with the clock of the host that reads them:
workers on several hosts need clocks that agree to well within `lease_s` (NTP does).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable

from indexing.job_types import JobStatus

_RUNNING, _QUEUED = JobStatus.RUNNING.value, JobStatus.QUEUED.value


class JobLeases:
    """The leases of the jobs a job store starts (`lease_s` None: it starts them unleased), and the queries that
    find and queue again the running jobs whose lease expired."""

    def __init__(self, conn: Callable[[], sqlite3.Connection], lease_s: float | None) -> None:
        self._conn = conn  # the job store's connection of the calling thread
        self.lease_s = lease_s
        self.owner = None if lease_s is None else uuid.uuid4().hex

    def on_start(self) -> tuple[str | None, float | None]:
        """The (owner, expiry) a job started now records; (None, None) unleased, which clears an earlier run's."""
        if self.lease_s is None:
            return None, None
        return self.owner, time.time() + self.lease_s

    def startable(self) -> tuple[str, tuple[object, ...]]:
        """The SQL condition (and its values) under which a job may be started by this process: queued, or running
        with no live lease of another process. A live lease means that another worker runs the job now (it renews
        the lease while it does), so a second start would run it twice at once. A running job may be started when
        its lease expired (its worker is gone), when it has none (an in-process queue or a CLI that crashed: those
        keep one runner at a time by other means), or when this process holds it (a run of its own that could not
        record its end: a worker runs one job at a time)."""
        clause = "(status = ? OR (status = ? AND (lease_until IS NULL OR lease_until < ? OR lease_owner = ?)))"
        return clause, (_QUEUED, _RUNNING, time.time(), self.owner)

    def renew(self) -> int:
        """Push the lease of every running job this process started `lease_s` ahead; how many."""
        if self.lease_s is None:
            return 0
        cur = self._conn().execute(
            "UPDATE jobs SET lease_until = ? WHERE status = ? AND lease_owner = ?",
            (time.time() + self.lease_s, _RUNNING, self.owner),
        )
        return cur.rowcount

    def held(self) -> list[str]:
        """The running jobs whose lease is live (their runner renews it: a worker, `vela ingest`, `vela reindex`)."""
        rows = self._conn().execute(
            "SELECT id FROM jobs WHERE status = ? AND lease_until >= ?", (_RUNNING, time.time())
        )
        return [r[0] for r in rows]

    def owns(self, job_id: str) -> bool:
        """Whether this process runs the job now: it is running under this job store's lease."""
        if self.owner is None:
            return False
        row = (
            self._conn()
            .execute(
                "SELECT 1 FROM jobs WHERE id = ? AND status = ? AND lease_owner = ?", (job_id, _RUNNING, self.owner)
            )
            .fetchone()
        )
        return row is not None

    def expired(self) -> list[str]:
        """The running jobs whose lease has expired (their worker is gone), oldest first."""
        rows = self._conn().execute(
            "SELECT id FROM jobs WHERE status = ? AND lease_until < ? ORDER BY created_at", (_RUNNING, time.time())
        )
        return [r[0] for r in rows]

    def requeue_expired(self, job_id: str) -> bool:
        """Put a running job whose lease has expired back to queued, as a queued job is: no start time, no progress,
        no lease. One conditional statement: False when the job ended, or its lease was renewed or taken by another
        worker, since `expired` read it. Its attempts count on; a cancel asked for meanwhile stays asked for."""
        cur = self._conn().execute(
            "UPDATE jobs SET status = ?, done = 0, started_at = NULL, lease_owner = NULL, lease_until = NULL "
            "WHERE id = ? AND status = ? AND lease_until < ?",
            (_QUEUED, job_id, _RUNNING, time.time()),
        )
        return cur.rowcount == 1
