"""An upsert is checked against the schema when it is asked for; a schema job queued ahead of it may declare a
field before it runs. The upsert job checks again under the writer lock: a value that no longer fits fails the job,
naming the document and field, and writes nothing (it used to store a value of the wrong type in a declared field)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus, JobStore
from indexing.store import CollectionStore
from models import EmbedderCache


def test_an_upsert_run_after_a_schema_job_is_checked_against_the_new_schema(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    store, jobs, embedders = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3"), EmbedderCache()
    dim = embedders.get(str(tiny_embedder_dir)).dim
    store.create(CollectionSettings(name="c", embedder=str(tiny_embedder_dir), dim=dim))

    def run(kind: JobKind, payload: list[Any]) -> str:
        return jobs.create(collection="c", kind=kind, payload=payload).id

    first = run(JobKind.UPSERT, [{"id": "a", "text": "tides", "metadata": {"x": 1}}])
    assert run_job(job_id=first, jobs=jobs, collections=store, embedders=embedders) == JobStatus.SUCCEEDED
    # Both asked for before either runs: the upsert was checked against the schema of then (no fields).
    schema = run(JobKind.SCHEMA, [{"fields": {"x": "integer"}, "strict": False}])
    late = run(
        JobKind.UPSERT,
        [
            {"id": "ok", "text": "fine", "metadata": {"x": 2}},
            {"id": "bad", "text": "moon", "metadata": {"x": "notint"}},
        ],
    )
    assert run_job(job_id=schema, jobs=jobs, collections=store, embedders=embedders) == JobStatus.SUCCEEDED
    assert run_job(job_id=late, jobs=jobs, collections=store, embedders=embedders) == JobStatus.FAILED
    error = jobs.get(late).error or ""
    assert "document 'bad': metadata.x: the field is declared integer" in error and "nothing was written" in error
    coll = store.get("c")
    assert coll.document("bad", passages=False) is None and coll.document("ok", passages=False) is None
