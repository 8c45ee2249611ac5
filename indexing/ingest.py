"""Running one job: chunk, embed and store documents in bounded batches, then publish fresh indexes."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from indexing.collection import Collection, CollectionNotFound
from indexing.context import commit_collection, ensure_context, queue_context_refresh, refresh_due
from indexing.filter_match import matching_ids
from indexing.filter_parser import parse_filter
from indexing.filters import Schema
from indexing.fusion_choice import after_ingest
from indexing.generations import serving_writer
from indexing.job_start import start_when_free
from indexing.jobs import GENERATION_KINDS, SNAPSHOT_KINDS, TERMINAL, JobKind, JobStatus, JobStore, end_job
from indexing.merger import after_commit
from indexing.metadata_bounds import MetadataLimits
from indexing.metadata_fit import SchemaMismatch, late_misfit, misfit_field
from indexing.patch_job import run_patch
from indexing.prepare import content_hash, prepare_documents, rewrite_if_only_metadata
from indexing.reindex import run_generation_job
from indexing.settings import RayIngestOptions
from indexing.shards import ShardedCollection
from indexing.snapshots import run_snapshot_job
from indexing.store import CollectionStore
from indexing.write_order import let_older_writes_end
from models import Embedder, EmbedderCache

log = logging.getLogger("vela.ingest")


def run_job(
    *,
    job_id: str,
    jobs: JobStore,
    collections: CollectionStore,
    embedders: EmbedderCache,
    batch_size: int = 256,
    commit_interval_s: float = 60.0,
    on_progress: Callable[[int, int], None] | None = None,
    worker: str = "in-process",
    context_refresh_fraction: float = 0.5,
    ray: RayIngestOptions | None = None,
    submit: Callable[[str], None] | None = None,
    metadata_limits: MetadataLimits | None = None,
) -> JobStatus:
    """Run a job to its end. Safe to run again after a crash: upserts by id converge to the same state.

    With `ray` (the process's IndexingSettings.ray_ingest()), an upsert into a sharded collection is embedded
    on that Ray cluster instead (indexing/ray_ingest.py); everything else runs here. A job that leaves a CDE
    collection's corpus drifted queues its context refresh through `submit` (the process's queue), or, with no
    queue, runs it here after the job. A patch checks what it would store against `metadata_limits` (the process's
    IndexingSettings.metadata_limits(); None: the settings' defaults)."""
    job = jobs.get(job_id)
    if job.status in TERMINAL:
        return job.status
    job = start_when_free(jobs, job_id, worker)  # waits while another worker runs it
    if job.status in TERMINAL:  # another worker ran it meanwhile
        return job.status

    made: float | None = None  # when the collection the job found was made

    def run_older(older: str) -> object:
        return run_job(
            job_id=older,
            jobs=jobs,
            collections=collections,
            embedders=embedders,
            batch_size=batch_size,
            commit_interval_s=commit_interval_s,
            worker=worker,
            context_refresh_fraction=context_refresh_fraction,
            submit=submit,
            metadata_limits=metadata_limits,
        )

    try:
        if job.kind in GENERATION_KINDS:  # reindex, promote, rollback (indexing/reindex.py)
            return run_generation_job(
                job_id=job_id, jobs=jobs, collections=collections, embedders=embedders, on_progress=on_progress
            )
        if job.kind in SNAPSHOT_KINDS:  # snapshot, restore (indexing/snapshots.py)
            return run_snapshot_job(
                job_id=job_id, jobs=jobs, collections=collections, embedders=embedders, on_progress=on_progress
            )
        let_older_writes_end(job, jobs, run_older)  # writes to one collection take effect in the order sent
        coll = collections.get(job.collection)
        made = collections.made_at(job.collection)  # deleted (and made again) under the job: another one then
        payload = jobs.payload(job_id)
        coll.reload_settings()  # a schema another process declared since this one opened the collection
        if ray is not None and isinstance(coll, ShardedCollection) and job.kind == JobKind.UPSERT:
            from indexing.ray_ingest import run_ray_job  # Ray is imported only on this path

            status = run_ray_job(
                job_id=job_id,
                jobs=jobs,
                coll=coll,
                payload=payload,
                ray=ray,
                batch_size=batch_size,
                on_progress=on_progress,
            )
            after_commit(collections, coll)
            after_ingest(collections, coll, embedders)  # the fusion chosen again once the collection doubled
            return end_job(jobs, job_id, status)
        embedder = embedders.get(coll.settings.embedder)
        if embedder.contextual and isinstance(coll, ShardedCollection):
            raise ValueError(f"collection {coll.name!r} is sharded: contextual embedders are not supported")
        # The generation that serves once the lock is held: a promotion while this job waited moves the writes.
        with serving_writer(coll, collections.follow) as coll:
            if (now := jobs.get(job_id).status) in TERMINAL:  # run to its end by another worker meanwhile
                return now
            if collections.made_at(job.collection) != made:  # deleted (and made again) while the job waited
                raise CollectionNotFound(job.collection)
            embedder = embedders.get(coll.settings.embedder)
            coll.reload_settings()  # read again under the lock: a schema job may have run meanwhile
            status, said = _run_batches(
                job_id,
                job.kind,
                payload,
                coll,
                jobs,
                embedder,
                batch_size,
                commit_interval_s,
                on_progress,
                metadata_limits or MetadataLimits(),
            )
            commit_collection(coll, embedder)
            # The corpus moved far from the sample the context came from: a reindex to the same embedder
            # samples again and re-embeds into a new generation while this one keeps serving.
            refresh = status == JobStatus.SUCCEEDED and refresh_due(coll, embedder, context_refresh_fraction)
        after_commit(collections, coll)  # searchable here at once; merges start in the background
        after_ingest(collections, coll, embedders)  # the fusion chosen again once the collection doubled
        # What the job did, recorded as it ends: in the statement that drops its payload, so the row never holds
        # both (SQLite bounds a row's size).
        status = end_job(jobs, job_id, status, result=said)
        if refresh:
            refresh_id = queue_context_refresh(jobs, coll)
            if refresh_id is not None and submit is not None:
                submit(refresh_id)
            elif refresh_id is not None:  # no queue (the CLI, tests): the refresh runs here, after this job
                run_job(job_id=refresh_id, jobs=jobs, collections=collections, embedders=embedders)
        return status
    except CollectionNotFound:
        return end_job(jobs, job_id, JobStatus.CANCELLED, error=f"collection {job.collection!r} was deleted")
    except Exception as exc:
        if made is not None and collections.made_at(job.collection) != made:
            # Deleted while the job ran (and perhaps made again by a later write): its files went from under it.
            # Cancelled, as the delete cancels the collection's other jobs.
            log.info("job stopped: collection deleted", extra={"job_id": job_id, "error": str(exc)})
            return end_job(jobs, job_id, JobStatus.CANCELLED, error=f"collection {job.collection!r} was deleted")
        log.exception("job failed", extra={"job_id": job_id, "collection": job.collection})
        return end_job(jobs, job_id, JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")


DELETE_BATCH = 1000  # documents per delete transaction


def _matching(coll: Collection, raw_filter: Any) -> list[str]:
    """Ids of the stored documents whose metadata passes the filter now (the writer lock is held)."""
    node = parse_filter(raw_filter, Schema.from_json(coll.settings.schema))
    if node is None:
        raise ValueError("a delete by filter needs a filter")  # the API refuses it first; never "delete all"
    return list(matching_ids(node, coll.scan_metadata(None, DELETE_BATCH), DELETE_BATCH))


def _route(coll: Collection, doc_ids: list[str]) -> list[tuple[Collection, list[int]]]:
    """Where each document is stored: (collection or shard, positions in doc_ids) for each non-empty group."""
    if not isinstance(coll, ShardedCollection):
        return [(coll, list(range(len(doc_ids))))]
    return [(coll.shards[i], pos) for i, pos in enumerate(coll.split(doc_ids)) if pos]


BATCH_CHARS = 256 * 1024  # text per batch at most (~300 full passages: seconds of encoding, well inside
# VELA_CLAIM_IDLE_S between heartbeats); one longer document makes a batch of its own


def _batches(payload: list[Any], max_docs: int, max_chars: int) -> Iterator[list[Any]]:
    """Consecutive slices of at most max_docs documents and about max_chars of text. Big batches let the
    encoder sort passages by length and pad little; the character cap keeps memory bounded."""
    batch: list[Any] = []
    chars = 0
    for doc in payload:
        size = len(doc["text"]) + len(doc.get("title") or "")
        if batch and (len(batch) == max_docs or chars + size > max_chars):
            yield batch
            batch, chars = [], 0
        batch.append(doc)
        chars += size
    if batch:
        yield batch


def _run_batches(
    job_id: str,
    kind: JobKind,
    payload: list[Any],
    coll: Collection,
    jobs: JobStore,
    embedder: Embedder,
    batch_size: int,
    commit_interval_s: float,
    on_progress: Callable[[int, int], None] | None,
    metadata_limits: MetadataLimits,
) -> tuple[JobStatus, dict[str, Any] | None]:
    """The job's status, and what it did for its `result` (None: nothing to add to what it recorded as it went)."""
    if kind in (JobKind.DELETE, JobKind.DELETE_BY_FILTER):
        ids = [str(x) for x in payload] if kind == JobKind.DELETE else _matching(coll, payload[0])
        # Run again after a crash, the job adds to what its earlier runs recorded (they deleted those already).
        deleted = int((jobs.get(job_id).result or {}).get("deleted", 0))
        for start in range(0, len(ids), DELETE_BATCH):  # bounded transactions, progress as they go
            part = ids[start : start + DELETE_BATCH]
            deleted += sum(target.docstore.delete([part[i] for i in pos]) for target, pos in _route(coll, part))
            jobs.progress(job_id, start + len(part), len(ids))
            jobs.set_result(job_id, {"deleted": deleted})
        jobs.progress(job_id, len(ids), len(ids))  # none matched: done 0 of 0
        jobs.set_result(job_id, {"deleted": deleted})
        return JobStatus.SUCCEEDED, None
    if kind == JobKind.UPSERT:
        # Checked when it was asked for, against the schema then; a schema job queued before it may have declared
        # a field since. Under the writer lock the schema holds still: a value that no longer fits writes nothing.
        misfit = late_misfit(coll.settings.schema, payload)
        if misfit is not None:
            raise SchemaMismatch(misfit)
    if kind in (JobKind.PATCH, JobKind.SCHEMA):
        said = run_patch(coll, payload, metadata_limits) if kind == JobKind.PATCH else None
        if kind == JobKind.SCHEMA:
            _declare(coll, payload[0])
        jobs.progress(job_id, len(payload))
        return JobStatus.SUCCEEDED, said
    context = ensure_context(coll, embedder, payload) if embedder.contextual else None
    last_commit = time.monotonic()
    done = 0
    # What the run did with each document, as Elasticsearch's "result" says created/updated/noop: embedded (new, or
    # its title or text changed), its metadata alone rewritten, or unchanged (stored as sent already).
    counts = {"embedded": 0, "metadata_only": 0, "unchanged": 0}
    for batch in _batches(payload, batch_size, BATCH_CHARS):
        if jobs.cancel_requested(job_id):
            return JobStatus.CANCELLED, counts  # work so far stays: every finished batch is a consistent state
        if isinstance(coll, ShardedCollection):
            # One encoder pass for the whole batch, in batch order, then each document to its shard.
            ids = [d["id"] for d in batch]
            stored = {
                k: v
                for shard, pos in _route(coll, ids)
                for k, v in shard.docstore.content_hashes([ids[i] for i in pos]).items()
            }
        else:
            stored = coll.docstore.content_hashes([d["id"] for d in batch])
        changed = [d for d in batch if stored.get(d["id"]) != content_hash(d, coll.settings.chunking)]
        counts["unchanged"] += len(batch) - len(changed)
        to_embed = rewrite_if_only_metadata(coll, changed) if changed else changed
        counts["metadata_only"] += len(changed) - len(to_embed)
        counts["embedded"] += len(to_embed)
        changed = to_embed
        if changed:
            prepared = prepare_documents(changed, coll, embedder, context)
            if isinstance(coll, ShardedCollection):
                coll.upsert(prepared)
            else:
                coll.docstore.upsert(prepared)
        done += len(batch)
        jobs.progress(job_id, done)
        if on_progress is not None:
            on_progress(done, len(payload))
        if time.monotonic() - last_commit > commit_interval_s:
            commit_collection(coll, embedder)  # long jobs become searchable as they go, a segment at a time
            last_commit = time.monotonic()
    return JobStatus.SUCCEEDED, counts


MAX_NAMED = 10  # offending documents a failed schema job names


def _declare(coll: Collection, schema: dict[str, Any]) -> None:
    """Declare metadata fields once every stored value of a newly declared (or retyped) field fits its type; else
    fail naming up to MAX_NAMED documents, and change nothing. The commit that follows publishes manifests that
    carry the schema, and searches then filter on those fields with typed columns."""
    old = Schema.from_json(coll.settings.schema).fields
    new = {k: t for k, t in Schema.from_json(schema).fields.items() if old.get(k) != t}
    bad: list[str] = []
    n_bad = 0
    if new:
        for doc_id, text in coll.scan_metadata(None, 1000):
            md = json.loads(text)
            if misfit_field(new, md) is not None:  # nested fields by their paths, as a write checks them
                n_bad += 1
                if len(bad) < MAX_NAMED:
                    bad.append(doc_id)
    if bad:
        declared = ", ".join(f"{k}: {t}" for k, t in sorted(new.items()))
        raise SchemaMismatch(
            f"{n_bad} document(s) hold values that do not fit the declared fields ({declared}), e.g. {bad}; "
            "nothing was changed"
        )
    coll.set_schema(schema)
