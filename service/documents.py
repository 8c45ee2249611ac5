"""Domain functions behind /index, /jobs and /collections (keyword-only; no HTTP here)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from indexing.bm25 import BM25Params
from indexing.chunking import ChunkingParams
from indexing.collection import Collection, CollectionConflict, CollectionSettings
from indexing.jobs import Job, JobKind
from indexing.metadata_fit import first_misfit
from indexing.queue import QueueUnavailable
from models.loading import resolve_model_dir
from service.capacity import check_disk, check_room
from service.model_registry import UnusableModel, model_unavailable, public_model_name, request_model
from service.state import AppState


class DocumentTooLarge(ValueError):
    pass


class BatchTooLarge(ValueError):
    pass


class InvalidMetadata(ValueError):
    """A document's metadata does not fit the collection's declared fields."""


class UnsupportedSharding(ValueError):
    """A sharded collection asked for with an embedder that cannot be sharded (a contextual one)."""


def check_batch_size(*, state: AppState, documents: int) -> None:
    """BatchTooLarge when one request names more documents than VELA_MAX_BATCH_DOCUMENTS (to index or to delete):
    one message for every request that writes documents in a batch."""
    limit = state.settings.max_batch_documents
    if documents > limit:
        raise BatchTooLarge(
            f"{documents} documents in one request; the limit is {limit} (VELA_MAX_BATCH_DOCUMENTS): split the batch"
        )


def check_limits(*, state: AppState, documents: list[dict[str, Any]]) -> None:
    s = state.settings
    check_batch_size(state=state, documents=len(documents))
    for d in documents:
        size = len(d["text"].encode())
        if size > s.max_document_bytes:
            raise DocumentTooLarge(
                f"document {d['id']!r} has {size} bytes of text; the limit is {s.max_document_bytes}: split it"
            )


def check_metadata_types(*, schema: dict[str, Any], documents: list[dict[str, Any]]) -> None:
    """Every declared field of every document holds a value of its type, a list of such values, or null."""
    misfit = first_misfit(schema.get("fields", {}), documents)
    if misfit is not None:
        raise InvalidMetadata(misfit)


def get_or_create_collection(
    *,
    state: AppState,
    name: str,
    embedder: str | None,
    shards: int | None = None,
    schema: dict[str, Any] | None = None,
) -> Collection:
    """Collections are created on first use with the process's defaults (or the embedder and shards named).

    A request's `embedder` is a registry name (UnknownModelName otherwise, before any collection is looked at);
    the process's default (VELA_EMBEDDER) is the operator's and may be a directory."""
    s = state.settings
    chosen = (
        s.embedder if embedder is None else request_model(settings=s, name=embedder, kind="embedder", field="embedder")
    )
    model_dir = str(state.embedders.resolve(chosen))
    asked = _Asked(model_dir if embedder is not None else None, shards, schema)
    if state.collections.exists(name):
        return _as_asked(state, state.collections.get(name), asked)
    restoring = state.jobs.unfinished_of(name, frozenset({JobKind.RESTORE}))
    if restoring is not None:  # the name is the restore's: writes go to it once the restore has made it
        raise CollectionConflict(f"a restore into {name!r} is under way (job {restoring}): write once it has ended")
    try:
        model = state.embedders.get(model_dir)
    except (OSError, ValueError) as exc:  # a registered folder that does not load: the request's fault, no path
        name_shown = public_model_name(settings=s, stored=model_dir)
        raise UnusableModel(f"embedder: model {name_shown!r} cannot be loaded ({type(exc).__name__})") from exc
    if (shards or 1) > 1 and model.contextual:
        raise UnsupportedSharding(f"embedder {model_dir!r} is contextual (CDE): its collections cannot be sharded")
    dim = model.dim
    settings = CollectionSettings(
        name=name,
        embedder=model_dir,
        dim=dim,
        small_dim=s.small_dim,
        chunking=ChunkingParams(max_tokens=s.chunk_tokens, overlap=s.chunk_overlap),
        bm25=BM25Params(
            method=s.bm25_method,
            k1=s.bm25_k1,
            b=s.bm25_b,
            min_token_chars=s.bm25_min_token_chars,
            normalize=s.bm25_normalize,
        ),
        dense_index=s.dense_index_params(),
        shards=shards or 1,
        schema=schema or {"fields": {}, "strict": False},
    )
    try:
        coll = state.collections.create(settings)
    except CollectionConflict:
        if not state.collections.exists(name):
            raise
        coll = state.collections.get(name)  # another embedder's, made meanwhile: said below by its public name
    # Another request (in this process or another) may have made it first, with its own settings: this one's
    # must agree with them as they would have a moment later, or it is refused, never silently dropped.
    return _as_asked(state, coll, asked)


@dataclass(frozen=True)
class _Asked:
    """What a write asked of its collection (None: not asked)."""

    embedder: str | None  # the model's folder
    shards: int | None
    schema: dict[str, Any] | None


def _as_asked(state: AppState, coll: Collection, asked: _Asked) -> Collection:
    """`coll`, when it has what the request asked for; CollectionConflict otherwise."""
    name, embedder, shards, schema = coll.name, asked.embedder, asked.shards, asked.schema
    if embedder is not None and coll.settings.embedder != embedder:
        shown_model = public_model_name(settings=state.settings, stored=coll.settings.embedder)
        raise CollectionConflict(f"collection {name!r} already uses embedder {shown_model!r}")
    if shards is not None and coll.settings.shards != shards:
        raise CollectionConflict(f"collection {name!r} already has {coll.settings.shards} shard(s)")
    if schema is not None and coll.settings.schema != schema:
        raise CollectionConflict(
            f"collection {name!r} has another schema ({json.dumps(coll.settings.schema)}): "
            "change it with PUT /collections/{name}/schema"
        )
    return coll


def check_model(state: AppState, coll: Collection) -> None:
    """ModelUnavailable when the collection's model folder is gone (`vela models remove --force`, or damaged):
    every write job runs the collection's writer, which loads it, so the job would fail after its 202. A stat,
    not a load."""
    try:
        resolve_model_dir(coll.settings.embedder)  # not the cache's resolve: it keeps a path it found once
    except (OSError, ValueError) as exc:
        what = "writes cannot run, so nothing was queued (searches in bm25 mode and reads still work)"
        raise model_unavailable(settings=state.settings, stored=coll.settings.embedder, exc=exc, what=what) from exc


def submit_upsert(
    *,
    state: AppState,
    collection: str,
    documents: list[dict[str, Any]],
    embedder: str | None = None,
    shards: int | None = None,
    schema: dict[str, Any] | None = None,
) -> Job:
    """Validate limits, make sure the collection exists, check the metadata against its declared fields,
    store the job durably, then queue it."""
    check_limits(state=state, documents=documents)
    if schema is not None:  # the request's own schema first: a refused request makes no collection
        check_metadata_types(schema=schema, documents=documents)
    new = not state.collections.exists(collection)
    if new:  # refused before the collection is made (the job store checks again as it queues the job)
        state.jobs.check_file()
        check_room(state.settings, state.jobs)
    coll = get_or_create_collection(state=state, name=collection, embedder=embedder, shards=shards, schema=schema)
    check_metadata_types(schema=coll.settings.schema, documents=documents)
    check_model(state, coll)
    job = state.jobs.create(collection=collection, kind=JobKind.UPSERT, payload=documents)
    try:
        state.queue.submit(job.id)
    except QueueUnavailable:
        # "Nothing was written": the collection this request made goes too, unless a write sent meanwhile uses it.
        if new and state.jobs.unfinished_of(collection, frozenset(JobKind)) is None and not coll.docstore.counts()[0]:
            state.collections.delete(collection)
        raise
    return job


def create_collection(
    *,
    state: AppState,
    name: str,
    embedder: str | None = None,
    shards: int | None = None,
    schema: dict[str, Any] | None = None,
) -> tuple[Collection, bool]:
    """An empty collection with these settings, as the first write would make it; True when this call made it.
    One already there with the settings asked is returned as it is (CollectionConflict when they differ)."""
    new = not state.collections.exists(name)
    if new:  # refused before the collection is made, as a first write is; it queues no job: no queue check
        state.jobs.check_file()
        check_disk(state.settings)
    coll = get_or_create_collection(state=state, name=name, embedder=embedder, shards=shards, schema=schema)
    return coll, new


def delete_collection(*, state: AppState, name: str) -> None:
    state.jobs.cancel_collection(name)
    state.collections.delete(name)
