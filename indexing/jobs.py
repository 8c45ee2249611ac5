"""Durable job records: what to ingest or delete, its status and progress. SQLite, shared by processes.

What a job is (kinds, statuses, the `Job` record, the errors) lives in indexing/job_types.py."""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from indexing import job_counts
from indexing import job_endings as endings
from indexing import job_lookups as lookups
from indexing.job_counts import JobCounts
from indexing.job_leases import JobLeases
from indexing.job_lookups import UNFINISHED
from indexing.job_retention import JobRetention, give_back_space
from indexing.job_schema import JOB_COLUMNS as _JOB_COLUMNS
from indexing.job_schema import init_schema, insert_job, select_listing
from indexing.job_schema import job_of_row as _job
from indexing.job_types import (
    GENERATION_KINDS,
    LONG_KINDS,
    SNAPSHOT_KINDS,
    TERMINAL,
    Job,
    JobKind,
    JobNotFound,
    JobNotRetryable,
    JobStatus,
    JobStoreMoved,
    without_paths,
)
from velaio.files import connect_sqlite, file_identity, init_sqlite, write_transaction

# The job types are defined in indexing/job_types.py; callers import them from here, beside the store.
__all__ = [
    "GENERATION_KINDS",
    "LONG_KINDS",
    "SNAPSHOT_KINDS",
    "TERMINAL",
    "Job",
    "JobCounts",
    "JobKind",
    "JobNotFound",
    "JobNotRetryable",
    "JobStatus",
    "JobStore",
    "JobStoreMoved",
    "end_job",
    "without_paths",
]

log = logging.getLogger("vela.jobs")

# The write-ahead log is cut back to this size after each checkpoint: a queued job of tens of megabytes passes
# through it, and SQLite otherwise keeps the file at its largest size for ever.
WAL_SIZE_LIMIT = 16 * 1024 * 1024


class JobStore:
    """`retention_s`: finished jobs older than this are deleted (None: kept for ever; indexing/job_retention.py).
    `lease_s`: the jobs this store starts are leased for that long, renewed as they run (indexing/job_leases.py).
    `admit`: called before a job is queued (made, or retried) and raises to refuse it; the API's refuses one while
    the disk is nearly full or too many jobs wait (service/capacity.py). A job made running (`running_in`) is not
    asked about: its caller runs it at once."""

    admit: Callable[[], None] | None = None

    def __init__(self, path: Path, retention_s: float | None = None, lease_s: float | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        self.retention = JobRetention(self._conn, retention_s)
        self.leases = JobLeases(self._conn, lease_s)
        init_sqlite(path, init_schema)
        self._file = file_identity(path)  # the file this store opened (check_file: still the one at `path`)

    def check_file(self) -> None:
        """JobStoreMoved when the file at `path` is gone or another one than this store opened."""
        if file_identity(self.path) != self._file:
            raise JobStoreMoved(
                f"the job store ({self.path.name}) was removed or replaced while the server ran: nothing can be "
                "recorded until the server restarts"
            )

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect_sqlite(self.path)
            conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            self._local.conn = conn
        return conn

    def create(
        self,
        *,
        collection: str,
        kind: JobKind,
        payload: list[Any],
        running_in: str | None = None,
        follow_up: bool = False,
    ) -> Job:
        """A queued job; with `running_in`, one recorded as already running there (a CLI that runs its own job:
        no server's runner then takes it for one a crash left behind). `follow_up`: one a running job queues (a
        context refresh), never refused by `admit`: the job that needs it was taken already."""
        self.check_file()
        job_id = uuid.uuid4().hex
        with self._admitted(running_in is None and not follow_up) as conn:
            conn.execute(*insert_job(job_id, collection, kind, payload, running_in))
        self.retention.now_and_then()
        return self.get(job_id)

    @contextlib.contextmanager
    def _admitted(self, ask: bool) -> Iterator[sqlite3.Connection]:
        """A write transaction in which `admit` (when `ask`) was asked first: its count of unfinished jobs and the
        insert made in the block are one step, so that processes queueing at once cannot pass the limit together."""
        with write_transaction(self._conn()) as conn:
            if ask and self.admit is not None:
                self.admit()  # on this thread's connection: inside the transaction
            yield conn

    def create_unless_unfinished(
        self,
        *,
        collection: str,
        kind: JobKind,
        payload: list[Any],
        kinds: frozenset[JobKind],
        running_in: str | None = None,
    ) -> Job | str:
        """Create the job (as `create` does) unless a job of one of `kinds` on the collection is queued or running:
        then that job's id. One transaction, so that of two requests sent together (from any processes) only one
        gets a job."""
        self.check_file()
        job_id = uuid.uuid4().hex
        with self._admitted(running_in is None) as conn:
            other = self.unfinished_of(collection, kinds)  # on this connection, inside the transaction
            if other is not None:
                return other
            conn.execute(*insert_job(job_id, collection, kind, payload, running_in))
        return self.get(job_id)

    def unfinished_of(self, collection: str, kinds: frozenset[JobKind]) -> str | None:
        """A queued or running job of one of `kinds` on the collection (the oldest), or None."""
        return lookups.unfinished_of(self._conn(), collection, kinds)

    def pending_document(self, collection: str, doc_id: str) -> dict[str, Any] | None:
        """The document `doc_id` as the newest unfinished upsert of the collection sent it, or None."""
        return lookups.pending_document(self._conn(), collection, doc_id)

    def latest_of(self, collection: str, kinds: frozenset[JobKind]) -> str | None:
        """The newest job of one of `kinds` on the collection, whatever its status, or None."""
        return lookups.latest_of(self._conn(), collection, kinds)

    def older_unfinished(self, job_id: str, kinds: frozenset[JobKind]) -> str | None:
        """The oldest queued or running job of one of `kinds` on `job_id`'s collection recorded before it."""
        return lookups.older_unfinished(self._conn(), job_id, kinds)

    def unfinished_count(self) -> int:
        """Jobs queued or running (a count over the status index, never the rows and their payloads)."""
        return lookups.count_unfinished(self._conn())

    def give_back_space(self) -> None:
        """Hand the pages of dropped payloads back to the file system (job_retention.give_back_space)."""
        give_back_space(self._conn())

    def queued(self) -> set[str]:
        """Jobs waiting for a runner."""
        return set(lookups.ids_by_status(self._conn(), (JobStatus.QUEUED.value,)))

    def queued_before(self, recorded_before: float) -> list[str]:
        """Jobs waiting for a runner that were recorded before `recorded_before` (time.time()), oldest first."""
        return lookups.ids_by_status(self._conn(), (JobStatus.QUEUED.value,), recorded_before=recorded_before)

    def get(self, job_id: str) -> Job:
        row = self._conn().execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        return _job(row)

    def listing(
        self,
        *,
        collection: str | None = None,
        statuses: frozenset[JobStatus] = frozenset(),
        kinds: frozenset[JobKind] = frozenset(),
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[tuple[Job, str | None]]:
        """Jobs newest first (by creation time, then id), each with its worker, at most `limit`, never their
        payloads; only those of `collection`, of `statuses` and of `kinds` where given. `before`: the (created_at,
        id) of the last job of the previous page, so that pages neither overlap nor skip while jobs are added."""
        return select_listing(self._conn(), collection, statuses, kinds, limit, before)

    def counts(self) -> JobCounts:
        """For metrics: jobs by (kind, status) now, and the totals of jobs finished and documents indexed."""
        return job_counts.read_counts(self._conn())

    def payload(self, job_id: str) -> list[Any]:
        row = self._conn().execute("SELECT payload FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        return list(json.loads(row[0] or "[]"))

    def unfinished(self) -> list[str]:
        """Jobs a crash may have interrupted, oldest first: they run again (at-least-once)."""
        return lookups.ids_by_status(self._conn(), UNFINISHED)

    def start(self, job_id: str, worker: str = "in-process") -> Job | None:
        """Mark the job running here, in one conditional statement, and return it; an ended job is returned as it
        is (another worker ran it). None, changing nothing, while another process runs it under a live lease
        (`JobLeases.startable`): of two workers that start one job at once, one runs it. Leased to this process
        when the store leases jobs (a `vela worker`'s), unleased otherwise."""
        owner, until = self.leases.on_start()
        startable, values = self.leases.startable()
        cur = self._conn().execute(
            "UPDATE jobs SET status = ?, started_at = COALESCE(started_at, ?), attempts = attempts + 1, "
            f"worker = ?, lease_owner = ?, lease_until = ? WHERE id = ? AND {startable}",
            (JobStatus.RUNNING.value, time.time(), worker, owner, until, job_id, *values),
        )
        job = self.get(job_id)
        return job if cur.rowcount == 1 or job.status in TERMINAL else None

    def progress(self, job_id: str, done: int, total: int | None = None) -> None:
        """Work done so far; `total` when the job learns its size only as it runs (a reindex counts documents)."""
        if total is None:
            self._conn().execute("UPDATE jobs SET done = ? WHERE id = ?", (done, job_id))
        else:
            self._conn().execute("UPDATE jobs SET done = ?, total = ? WHERE id = ?", (done, total, job_id))

    def set_result(self, job_id: str, result: dict[str, Any]) -> None:
        """Recorded as soon as it is known, not only at the end: a job resumed after a crash still reports it. An
        ended job's result is final, as its status is (see `finish`)."""
        self._conn().execute(
            "UPDATE jobs SET result = ? WHERE id = ? AND status IN (?, ?)",
            (json.dumps(result), job_id, *UNFINISHED),
        )

    def finish(
        self, job_id: str, status: JobStatus, error: str | None = None, *, result: dict[str, Any] | None = None
    ) -> bool:
        """End the job with `status` (and `result`, when given, in the same statement); False when it had ended
        already. An ended job's status is final: a second run of it (one entry delivered twice, a takeover while
        its worker still ran) ending later, and failing where the first succeeded, changes nothing. Only
        `requeue` (POST /jobs/{id}/retry) takes a failed job back, to queued."""
        ended = endings.finish(self._conn(), job_id, status, without_paths(error), result)
        if ended:  # a dropped payload's pages, or a kept one's old copy (an update rewrites the row)
            self.give_back_space()
        return ended

    def fail_if_queued(self, job_id: str, error: str) -> bool:
        """Fail a job that no worker has started, in one statement; False when one has (or it has ended)."""
        return endings.fail_if_queued(self._conn(), job_id, without_paths(error))

    def requeue(self, job_id: str) -> Job:
        """Queue a failed job again; JobNotRetryable unless it failed. Its error and start time are cleared (a
        queued job has neither: the earlier run's error is in the server's log), its attempts counted on."""
        if self.admit is not None and self.get(job_id).status == JobStatus.FAILED:
            self.admit()
        requeued = endings.requeue(self._conn(), job_id)
        job = self.get(job_id)
        if not requeued:
            raise JobNotRetryable(f"job {job_id!r} is {job.status.value}: only a failed job can be retried")
        return job

    def request_cancel(self, job_id: str) -> Job:
        """Queued jobs are cancelled at once; running ones stop at their next batch."""
        if not endings.request_cancel(self._conn(), job_id):
            raise JobNotFound(job_id)
        self.give_back_space()
        return self.get(job_id)

    def worker(self, job_id: str) -> str | None:
        """Which worker ran (or runs) the job last."""
        row = self._conn().execute("SELECT worker FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else row[0]

    def cancel_requested(self, job_id: str) -> bool:
        row = self._conn().execute("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return bool(row and row[0])

    def cancel_collection(self, collection: str) -> None:
        """A deleted collection's pending jobs are cancelled: queued ones end now (as `request_cancel` ends them),
        running ones at their next batch."""
        endings.cancel_collection(self._conn(), collection)
        self.give_back_space()


def end_job(
    jobs: JobStore, job_id: str, status: JobStatus, error: str | None = None, result: dict[str, Any] | None = None
) -> JobStatus:
    """End the job with `status` (JobStore.finish); the status it holds after that. A job that another run of it
    ended first (an entry delivered twice) keeps that run's status and result, and this run says so in the log."""
    if jobs.finish(job_id, status, error, result=result):
        return status
    final = jobs.get(job_id).status
    log.log(
        logging.INFO if final == status else logging.WARNING,  # a run that ends otherwise than the first: worth a look
        "job had ended already: its status stays",
        extra={"job_id": job_id, "status": final.value, "this_run": status.value},
    )
    return final
