"""Writes to one collection take effect in the order they were recorded, whichever worker takes which first: a
newer write runs an older one that nobody started before itself, waits for one that runs elsewhere, and takes over
one that stalled; the older one's own worker then finds it ended and changes nothing."""

from __future__ import annotations

import threading
from pathlib import Path

from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.store import CollectionStore
from indexing.write_order import let_older_writes_end
from models import EmbedderCache


def _text(store: CollectionStore, doc_id: str) -> str | None:
    record = store.get("c1").document(doc_id, passages=False)
    return None if record is None else record.text


def _write(jobs: JobStore, text: str) -> str:
    return jobs.create(collection="c1", kind=JobKind.UPSERT, payload=[{"id": "x", "text": text}]).id


def test_a_newer_write_taken_first_runs_the_older_one_before_itself(
    store: CollectionStore, settings: CollectionSettings, embedders: EmbedderCache, tmp_path: Path
) -> None:
    store.create(settings)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    first, second = _write(jobs, "the first write"), _write(jobs, "the second write")
    deleted = jobs.create(collection="c1", kind=JobKind.DELETE, payload=["x"]).id
    again = _write(jobs, "written after the delete")

    def run(job_id: str) -> JobStatus:
        return run_job(job_id=job_id, jobs=jobs, collections=store, embedders=embedders)

    # Workers took them newest first (each had its own; the lock would have let any go first).
    assert run(again) == JobStatus.SUCCEEDED
    assert [jobs.get(j).status for j in (first, second, deleted)] == [JobStatus.SUCCEEDED] * 3
    assert _text(store, "x") == "written after the delete"
    for late in (deleted, second, first):  # their own workers come to them now: ended, nothing changes
        assert run(late) == JobStatus.SUCCEEDED
        assert jobs.get(late).attempts == 1
    assert _text(store, "x") == "written after the delete"


def test_an_older_write_running_elsewhere_is_waited_for_then_taken_over_when_it_stalls(tmp_path: Path) -> None:
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    older, newer = _write(jobs, "older"), _write(jobs, "newer")
    jobs.start(older, "w1")  # running on another worker
    ran: list[str] = []

    def finish_elsewhere() -> None:
        jobs.progress(older, 1)
        jobs.finish(older, JobStatus.SUCCEEDED)

    timer = threading.Timer(0.5, finish_elsewhere)
    timer.start()
    let_older_writes_end(jobs.get(newer), jobs, ran.append, stall_s=30.0)  # returns once w1 ended it
    timer.join()
    assert ran == [] and jobs.get(older).status == JobStatus.SUCCEEDED

    jobs.finish(newer, JobStatus.SUCCEEDED)
    stalled, newest = _write(jobs, "stalled"), _write(jobs, "newest")
    jobs.start(stalled, "w-dead")  # its worker died: no progress, ever

    def take_over(job_id: str) -> None:
        ran.append(job_id)
        jobs.finish(job_id, JobStatus.SUCCEEDED)

    let_older_writes_end(jobs.get(newest), jobs, take_over, stall_s=0.3)
    assert ran == [stalled]
