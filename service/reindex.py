"""Domain functions behind the generation routes (keyword-only; no HTTP here): reindex, promote, rollback, and
what GET /collections/{name} shows of a collection's generations."""

from __future__ import annotations

from typing import Any

from indexing import generations as gens
from indexing.chunking import ChunkingParams
from indexing.collection import CollectionConflict
from indexing.collection_settings import load_settings
from indexing.gate import UnknownDataset, dataset_dir
from indexing.jobs import GENERATION_KINDS, TERMINAL, Job, JobKind, JobNotFound
from models.loading import resolve_model_dir
from service.model_registry import model_unavailable, request_model
from service.state import AppState


class NothingToSwitch(ValueError):
    """POST promote with no finished generation waiting, or rollback with none kept."""


class InvalidChunking(ValueError):
    """A reindex's chunking that, completed with the serving generation's, has an overlap over half its passages."""


def _reindexing(collection: str, job_id: str) -> CollectionConflict:
    return CollectionConflict(f"collection {collection!r} is being reindexed by job {job_id}: wait or cancel it")


def _busy(state: AppState, pointer: gens.Pointer) -> str | None:
    """The unfinished generation job of a collection, if any."""
    if pointer.building is not None and pointer.job and not pointer.ready:
        try:
            if state.jobs.get(pointer.job).status not in TERMINAL:
                return pointer.job
        except JobNotFound:
            return None
    return None


def reindex_spec(*, state: AppState, collection: str, embedder: str, options: dict[str, Any]) -> dict[str, Any]:
    """What a reindex job runs, checked: the embedder name (UnknownModelName before anything else is looked at),
    the gate's dataset name (UnknownDataset), and that no reindex of the collection is under way
    (CollectionConflict)."""
    model = request_model(settings=state.settings, name=embedder, kind="embedder", field="embedder")
    resolved = str(state.embedders.resolve(model))
    coll = state.collections.get(collection)
    gate = options.get("gate")
    if gate and gate.get("dataset"):
        dataset_dir(state.settings.data_dir.expanduser().resolve(), gate["dataset"], gate.get("split", "test"))
    running = _busy(state, gens.read_pointer(state.collections.root / coll.name))
    if running:
        raise _reindexing(coll.name, running)
    chunking = options.get("chunking")
    if chunking is not None:
        options = {**options, "chunking": _chunking(coll.settings.chunking, chunking)}
    return {**options, "collection": coll.name, "embedder": resolved, "embedder_name": embedder}


def _chunking(current: ChunkingParams, asked: dict[str, int]) -> dict[str, int]:
    """The new generation's chunking: what the request gave, the serving generation's for the rest. An overlap
    that does not fit the pair so made is refused (InvalidChunking), not changed behind the request's back."""
    chunking = {"max_tokens": current.max_tokens, "overlap": current.overlap, **asked}
    if chunking["overlap"] > chunking["max_tokens"] // 2:
        kept = "max_tokens" if "max_tokens" not in asked else "overlap"
        raise InvalidChunking(
            f"chunking.overlap {chunking['overlap']} is more than half of chunking.max_tokens "
            f"{chunking['max_tokens']} (chunking.{kept} is the serving generation's): give both"
        )
    return chunking


def submit_reindex(*, state: AppState, collection: str, embedder: str, options: dict[str, Any]) -> Job:
    """Check the request (reindex_spec), record the job, queue it."""
    spec = reindex_spec(state=state, collection=collection, embedder=embedder, options=options)
    job = state.jobs.create_unless_unfinished(
        collection=spec["collection"], kind=JobKind.REINDEX, payload=[spec], kinds=GENERATION_KINDS
    )
    if isinstance(job, str):  # one sent just before is queued (the pointer names it only once it runs)
        raise _reindexing(spec["collection"], job)
    state.queue.submit(job.id)
    return job


def switch_spec(*, state: AppState, collection: str, kind: JobKind) -> dict[str, Any]:
    """A promote (of the finished generation waiting for it) or a rollback (to the kept one), checked."""
    coll = state.collections.get(collection)
    # An unfinished generation job first: a promote sent during a reindex is refused naming it (create_switch), not
    # as one with nothing to promote, since the reindex has not made its generation ready yet.
    unfinished = state.jobs.unfinished_of(coll.name, GENERATION_KINDS)
    if unfinished is not None:
        raise _unfinished(state, coll.name, kind, unfinished)
    pointer = gens.read_pointer(state.collections.root / coll.name)
    if kind == JobKind.PROMOTE and (pointer.building is None or not pointer.ready):
        raise NothingToSwitch(f"collection {coll.name!r} has no finished generation waiting for promotion")
    if kind == JobKind.ROLLBACK and pointer.previous is None:
        raise NothingToSwitch(f"collection {coll.name!r} keeps no previous generation to roll back to")
    target = pointer.building if kind == JobKind.PROMOTE else pointer.previous
    if target is not None:  # the generation that would serve: its model must load (a stat here, as writes check)
        embedder = load_settings(gens.gen_root(state.collections.root / coll.name, target)).embedder
        try:
            resolve_model_dir(embedder)  # not the cache's resolve: it keeps a path it found once
        except (OSError, ValueError) as exc:
            what = f"the {kind.value} would serve a generation that could not embed a query, so nothing was queued"
            raise model_unavailable(settings=state.settings, stored=embedder, exc=exc, what=what) from exc
    return {"collection": coll.name}


def create_switch(*, state: AppState, collection: str, kind: JobKind, running_in: str | None = None) -> Job:
    """Record a promote or a rollback, checked (switch_spec), unless a generation job of the collection is
    unfinished (CollectionConflict): a switch acts on the pointer as it is when it runs, so a rollback sent twice (a
    client's retry) would undo itself, and one sent during a reindex would roll back what that reindex promotes.
    `running_in`: recorded as running there (a CLI that runs its own job), else queued."""
    spec = switch_spec(state=state, collection=collection, kind=kind)
    job = state.jobs.create_unless_unfinished(
        collection=spec["collection"], kind=kind, payload=[spec], kinds=GENERATION_KINDS, running_in=running_in
    )
    if isinstance(job, str):  # one recorded since switch_spec looked
        raise _unfinished(state, spec["collection"], kind, job)
    return job


def _unfinished(state: AppState, collection: str, kind: JobKind, job: str) -> CollectionConflict:
    """The refusal of a `kind` switch while `job`, a generation job of the collection, is unfinished."""
    try:
        other = state.jobs.get(job).kind.value
    except JobNotFound:  # ended and removed meanwhile
        other = "generation"
    return CollectionConflict(
        f"collection {collection!r} has a {other} job ({job}) not finished yet: wait for it, "
        f"then send the {kind.value} again if it is still wanted"
    )


def submit_switch(*, state: AppState, collection: str, kind: JobKind) -> Job:
    """Record a promote or a rollback (create_switch) and queue it."""
    job = create_switch(state=state, collection=collection, kind=kind)
    state.queue.submit(job.id)
    return job


def generation_info(*, state: AppState, collection: str) -> dict[str, Any]:
    return gens.describe(state.collections.root / collection)


__all__ = [
    "InvalidChunking",
    "NothingToSwitch",
    "UnknownDataset",
    "create_switch",
    "generation_info",
    "reindex_spec",
    "submit_reindex",
    "submit_switch",
    "switch_spec",
]
