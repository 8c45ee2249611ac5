"""Jobs through the ingest runner: idempotent re-runs, cancellation, deletes, crash-safe segments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.manifest import current_manifest
from indexing.postings import TermStats
from indexing.segment import Segment, SegmentError
from indexing.store import CollectionStore
from models import EmbedderCache

DOCS = [
    {"id": f"d{i}", "title": f"Title {i}", "text": f"document number {i} about topic{i % 3}. " * (1 + i)}
    for i in range(12)
]


def _run(
    store: CollectionStore, jobs: JobStore, embedders: EmbedderCache, docs: list, kind: JobKind = JobKind.UPSERT
) -> JobStatus:
    job = jobs.create(collection="c1", kind=kind, payload=docs)
    return run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders, batch_size=4)


def test_rerunning_a_job_converges_to_the_same_state(
    store: CollectionStore, settings: CollectionSettings, embedders: EmbedderCache, tmp_path: Path
) -> None:
    coll = store.create(settings)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    assert _run(store, jobs, embedders, DOCS) == JobStatus.SUCCEEDED
    docs1, passages1 = coll.docstore.counts()
    snap1 = coll.view()
    assert docs1 == 12 and passages1 > 12 and snap1.n_live == passages1
    assert snap1.seq == coll.docstore.seq()
    # The same documents again (an at-least-once redelivery): nothing duplicates, nothing re-embeds.
    seq_before = coll.docstore.seq()
    assert _run(store, jobs, embedders, DOCS) == JobStatus.SUCCEEDED
    assert coll.docstore.counts() == (docs1, passages1)
    assert coll.docstore.seq() == seq_before
    view = coll.view()
    ids, _ = view.bm25([["topic1"]], view.term_stats({"topic1"}))[0]
    assert len(set(ids.tolist())) == len(ids) > 0


def test_cancel_stops_at_a_batch_boundary_and_stays_consistent(
    store: CollectionStore, settings: CollectionSettings, embedders: EmbedderCache, tmp_path: Path
) -> None:
    coll = store.create(settings)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    job = jobs.create(collection="c1", kind=JobKind.UPSERT, payload=DOCS)
    jobs.start(job.id)
    jobs.request_cancel(job.id)  # a running job: stops before its next batch
    status = run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders, batch_size=4)
    assert status == JobStatus.CANCELLED
    assert coll.view().seq == coll.docstore.seq()
    queued = jobs.create(collection="c1", kind=JobKind.UPSERT, payload=DOCS)
    assert jobs.request_cancel(queued.id).status == JobStatus.CANCELLED
    assert jobs.unfinished() == []


def test_delete_job_and_deleted_collection(
    store: CollectionStore, settings: CollectionSettings, embedders: EmbedderCache, tmp_path: Path
) -> None:
    coll = store.create(settings)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    _run(store, jobs, embedders, DOCS[:3])
    assert _run(store, jobs, embedders, ["d0", "missing"], JobKind.DELETE) == JobStatus.SUCCEEDED
    assert coll.docstore.counts()[0] == 2
    store.delete("c1")
    assert _run(store, jobs, embedders, DOCS[:1]) == JobStatus.CANCELLED


def test_a_collection_deleted_while_its_job_runs_can_be_made_again(
    store: CollectionStore, settings: CollectionSettings, embedders: EmbedderCache, tmp_path: Path
) -> None:
    """A delete waits for the running job's batch and cancels the rest; what the job does after it (its merge and
    fusion work, started in the background) must not make files where the collection was: a new collection of
    that name is made as if there had never been one."""
    import threading

    from indexing import ingest
    from indexing.merger import wait_background

    store.create(settings)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    deleted = threading.Event()
    real_after_commit = ingest.after_commit

    def after_commit_once_deleted(*args: Any) -> None:
        assert deleted.wait(30)
        real_after_commit(*args)

    job = jobs.create(collection="c1", kind=JobKind.UPSERT, payload=DOCS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ingest, "after_commit", after_commit_once_deleted)
        status: list[JobStatus] = []
        runner = threading.Thread(
            target=lambda: status.append(
                run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders, batch_size=4)
            )
        )
        jobs.start(job.id)
        jobs.cancel_collection("c1")  # what DELETE /collections/{name} does first
        runner.start()
        store.delete("c1")  # waits for the job's writer lock
        deleted.set()
        runner.join(60)
    assert wait_background(60)
    assert status == [JobStatus.CANCELLED]
    assert not (tmp_path / "collections" / "c1").exists()
    assert store.create(settings).docstore.counts() == (0, 0)
    # Leftovers from before this was mended (a directory without settings) do not block the name either.
    store.delete("c1")
    (tmp_path / "collections" / "c1" / "segments").mkdir(parents=True)
    assert store.create(settings).docstore.counts() == (0, 0)


def test_truncated_segment_file_is_detected_and_rebuilt(
    store: CollectionStore, settings: CollectionSettings, embedders: EmbedderCache, tmp_path: Path
) -> None:
    coll = store.create(settings)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    _run(store, jobs, embedders, DOCS)
    q = np.eye(1, 384, dtype=np.float32)
    before = coll.view().dense(q, 5, False, 0)[0]
    for name in ("dense-full.faiss", "bm25/rows.npy"):
        seg = current_manifest(coll.segments_dir)["segments"][0]["name"]  # type: ignore[index]
        target = coll.segments_dir / seg / name
        with open(target, "r+b") as f:
            f.truncate(target.stat().st_size // 2)
        with pytest.raises(SegmentError):
            Segment.load(coll.segments_dir / seg)
        fresh = CollectionStore(tmp_path).get("c1")  # as after a restart
        assert fresh.check_consistency().startswith("rebuilt")
        after = fresh.view().dense(q, 5, False, 0)[0]
        assert np.array_equal(before[0], after[0]) and np.allclose(before[1], after[1])
    assert CollectionStore(tmp_path).get("c1").check_consistency() == "ok"
    assert TermStats(1, 1, {}).avg_len == 1.0


def test_collection_names_are_validated(store: CollectionStore, settings: CollectionSettings) -> None:
    from dataclasses import replace

    for bad in ("", "../x", "a/b", ".hidden", "x" * 65):
        with pytest.raises(ValueError, match="collection name"):
            store.create(replace(settings, name=bad))


def test_batches_are_capped_by_documents_and_by_text() -> None:
    from indexing.ingest import _batches

    docs = [{"id": str(i), "text": "x" * n} for i, n in enumerate([10, 10, 10, 50, 10, 200, 10])]
    sizes = [[d["id"] for d in b] for b in _batches(docs, max_docs=3, max_chars=60)]
    assert sizes == [["0", "1", "2"], ["3", "4"], ["5"], ["6"]]
    assert [d for b in _batches(docs, 256, 1_000_000) for d in b] == docs


def test_a_delete_run_again_after_a_crash_adds_to_what_it_had_deleted(
    store: CollectionStore, settings: CollectionSettings, embedders: EmbedderCache, tmp_path: Path
) -> None:
    coll = store.create(settings)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    assert _run(store, jobs, embedders, DOCS) == JobStatus.SUCCEEDED
    job = jobs.create(collection="c1", kind=JobKind.DELETE_BY_FILTER, payload=[{"must": []}])
    # The first run deleted 5 documents, recorded that, and the process died: the run again finds 7.
    coll.docstore.delete([d["id"] for d in DOCS[:5]])
    jobs.start(job.id)
    jobs.set_result(job.id, {"deleted": 5})
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders) == JobStatus.SUCCEEDED
    assert jobs.get(job.id).result == {"deleted": 12} and coll.docstore.counts()[0] == 0


def test_a_job_whose_collection_was_deleted_and_made_again_under_it_is_cancelled(
    store: CollectionStore, settings: CollectionSettings, embedders: EmbedderCache, tmp_path: Path
) -> None:
    """A write accepted just as its collection was deleted (the delete's cancel came before the job was recorded)
    runs on the folder the delete removes, while a later write makes the name again: it ends cancelled, as the
    delete's other jobs do, not failed with the missing folder's FileNotFoundError (a retry would be wrong)."""
    import dataclasses

    from indexing.collection import Collection

    store.create(settings)
    jobs = JobStore(tmp_path / "jobs.sqlite3")
    job = jobs.create(collection="c1", kind=JobKind.UPSERT, payload=DOCS)
    real = Collection.reload_settings
    once: list[bool] = []

    def deleted_and_made_again(self: Collection) -> bool:
        if not once:  # the job has its collection object; it has not taken the writer lock yet
            once.append(True)
            store.delete("c1")
            store.create(dataclasses.replace(settings, created_at=settings.created_at + 1))  # a new request's
        return real(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Collection, "reload_settings", deleted_and_made_again)
        status = run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders, batch_size=4)
    assert status == JobStatus.CANCELLED
    assert jobs.get(job.id).error == "collection 'c1' was deleted"
    assert store.get("c1").docstore.counts() == (0, 0)  # the new collection holds nothing of the old job
