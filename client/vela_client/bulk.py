"""The bookkeeping of one `index_in_batches` call, shared by the sync and async clients (which only send and wait
differently): the batches cut so far, the jobs the server accepted and saw end, the progress reported, what a
413 changes, and what an error says was already sent."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vela_client import routes
from vela_client.batches import Batch, BatchBounds, BatchBuilder, encode_document, envelope_head, rebatch
from vela_client.calls import DocumentLike, _model
from vela_client.errors import PayloadTooLarge, Unavailable, VelaError
from vela_client.models import Job, JobAccepted
from vela_client.routes import Call

log = logging.getLogger("vela_client")

# With wait=True: jobs sent and not yet seen to end. Two keep the server busy (one runs while the next waits,
# already sent) without queueing the whole corpus on it ahead of its being embedded.
PENDING_JOBS = 2
# The 503 a batch meets while the server has VELA_MAX_QUEUED_JOBS jobs queued or running. While the call has jobs
# of its own unfinished, it waits for the oldest of them to end and sends the batch again (the queue has room once
# that job has left it, unless others took it), rather than retrying after Retry-After a few times and giving up
# part-way through the corpus.
QUEUE_FULL = "queue_full"


@dataclass(frozen=True)
class IndexProgress:
    """Where an `index_in_batches` call stands, given to its `on_progress` after each batch the server accepts
    and, with `wait=True`, each new state of a job seen while waiting."""

    documents_sent: int  # in batches the server accepted
    documents_done: int  # that the jobs have processed, as far as seen (with wait=True; else 0)
    batches_sent: int
    batches_finished: int  # jobs seen to have ended (with wait=True)
    total: int | None  # documents in the input, when it has a len(); None for a generator
    job: Job | None  # the state just seen; None when a batch has just been accepted


ProgressReport = Callable[[IndexProgress], object]
AsyncProgressReport = Callable[[IndexProgress], object | Awaitable[object]]


def batch_call(batch: Batch, *, queue_full_final: bool = False) -> Call[JobAccepted]:
    """`POST /index` with the batch's bytes as they were measured. `queue_full_final`: a 503 `queue_full` is
    raised at once, not retried (the call has a job of its own to wait for instead)."""
    headers = {"Content-Type": "application/json"}
    final = frozenset({QUEUE_FULL}) if queue_full_final else frozenset()
    return routes.INDEX.call(_model(JobAccepted), content=batch.body(), headers=headers, final_codes=final)


class BulkIndex:
    """One call's state. The client feeds it documents (`add`, then `finish`), sends each batch it hands back,
    records what the server answered (`accepted`, `refused`) and, waiting, what each job came to (`seen`,
    `ended`)."""

    def __init__(
        self, envelope: Mapping[str, Any], bounds: BatchBounds, *, total: int | None, timeout: float | None
    ) -> None:
        self._builder = BatchBuilder(envelope_head(envelope), bounds)
        self._total = total
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._position = 0
        self._input_ended = False
        self.accepted: list[JobAccepted] = []
        self.finished: list[Job] = []
        self.pending: deque[JobAccepted] = deque()
        self._sent_documents = 0
        self._done_documents = 0  # of the jobs that ended

    # Cutting batches

    def add(self, doc: DocumentLike) -> Batch | None:
        """The next document of the input; a batch to send when one is full."""
        encoded = encode_document(doc, self._position, self._builder.bounds)
        self._position += 1
        return self._builder.add(encoded)

    def finish(self) -> Batch | None:
        """The input has ended: the last batch, if any."""
        self._input_ended = True
        return self._builder.finish()

    # What the server answered

    def accepted_batch(self, batch: Batch, accepted: JobAccepted) -> IndexProgress:
        self.accepted.append(accepted)
        self.pending.append(accepted)
        self._sent_documents += len(batch.documents)
        return self._progress(None)

    def refused(self, batch: Batch, error: VelaError, unsent: list[Batch]) -> list[Batch]:
        """After a 413 for `batch`: its documents and those of the batches cut but `unsent` behind it, in smaller
        batches, and every later batch kept as small. The server checks these limits before it records anything,
        so nothing of the refused batch was written. A batch of one document cannot be split: then the error is
        raised, naming that document."""
        if not isinstance(error, PayloadTooLarge) or error.status != 413:
            raise error
        if len(batch.documents) == 1:
            error.add_note(f"the request held one document, {batch.documents[0].named}")
            raise error
        size = len(batch.body())
        bounds = self._builder.bounds.halved(len(batch.documents), size)
        log.info(
            "a batch of %d documents (%d bytes) was refused as too large (%s): sending at most %d documents and "
            "%d bytes a request from now on",
            len(batch.documents),
            size,
            error.message,
            bounds.documents,
            bounds.bytes,
        )
        self._builder.bounds = bounds
        return rebatch([d for b in (batch, *unsent) for d in b.documents], self._builder.head, bounds)

    # Waiting

    def must_wait(self) -> bool:
        """Whether to wait for the oldest job before sending another batch."""
        return len(self.pending) >= PENDING_JOBS

    def remaining(self) -> float | None:
        """Seconds left of the call's timeout (0 once passed: the next wait checks once, then gives up)."""
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def queue_full(self, error: Unavailable) -> JobAccepted:
        """The server's queue is full and this call has jobs unfinished: the oldest, to wait for before the batch is
        sent again."""
        oldest = self.pending[0]
        log.info(
            "the server's job queue is full (%s): waiting for job %s, sent by this call, to end before sending the "
            "next batch again",
            error.message,
            oldest.job_id,
        )
        return oldest

    def left_queue(self) -> None:
        """The oldest pending job has ended, without wait=True (its state is not kept: the call returns the
        accepted jobs)."""
        self.pending.popleft()

    def seen(self, job: Job) -> IndexProgress:
        """A new state of the job waited on: the progress to report."""
        return self._progress(job)

    def ended(self, job: Job) -> None:
        self.pending.popleft()
        self.finished.append(job)
        self._done_documents += job.done

    def _progress(self, job: Job | None) -> IndexProgress:
        running = job.done if job is not None and not job.finished else 0
        ended_now = job.done if job is not None and job.finished else 0
        return IndexProgress(
            documents_sent=self._sent_documents,
            documents_done=self._done_documents + running + ended_now,
            batches_sent=len(self.accepted),
            batches_finished=len(self.finished) + (1 if job is not None and job.finished else 0),
            total=self._total,
            job=job,
        )

    # Errors

    def annotate(self, error: BaseException) -> None:
        """Say on an error what had been sent: the documents before it may be indexed (or being indexed)."""
        if not self.accepted:
            error.add_note("index_in_batches: nothing had been sent")
            return
        ids = ", ".join(a.job_id for a in self.accepted[-3:])
        jobs = f"in {len(self.accepted)} jobs (the last: {ids})"
        if self._input_ended and self._sent_documents == self._position:
            error.add_note(f"index_in_batches: the server had accepted all {self._sent_documents} documents, {jobs}")
            return
        error.add_note(
            f"index_in_batches: the server had accepted the first {self._sent_documents} documents of the input, "
            f"{jobs}; the rest was not sent"
        )
