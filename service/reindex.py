"""Domain functions behind the generation routes (keyword-only; no HTTP here): reindex, promote, rollback, and
what GET /collections/{name} shows of a collection's generations."""

from __future__ import annotations

from typing import Any

from indexing import generations as gens
from indexing.collection import CollectionConflict
from indexing.gate import UnknownDataset, dataset_dir
from indexing.jobs import TERMINAL, Job, JobKind, JobNotFound
from service.model_registry import request_model
from service.state import AppState


class NothingToSwitch(ValueError):
    """POST promote with no finished generation waiting, or rollback with none kept."""


def _busy(state: AppState, pointer: gens.Pointer) -> str | None:
    """The unfinished generation job of a collection, if any."""
    if pointer.building is not None and pointer.job and not pointer.ready:
        try:
            if state.jobs.get(pointer.job).status not in TERMINAL:
                return pointer.job
        except JobNotFound:
            return None
    return None


def submit_reindex(*, state: AppState, collection: str, embedder: str, options: dict[str, Any]) -> Job:
    """Check the embedder name (UnknownModelName before anything else is looked at), the gate's dataset name
    (UnknownDataset) and that no reindex of the collection is under way (CollectionConflict), then queue it."""
    model = request_model(settings=state.settings, name=embedder, kind="embedder", field="embedder")
    resolved = str(state.embedders.resolve(model))
    coll = state.collections.get(collection)
    gate = options.get("gate")
    if gate and gate.get("dataset"):
        dataset_dir(state.settings.data_dir.expanduser().resolve(), gate["dataset"], gate.get("split", "test"))
    root = state.collections.root / coll.name
    running = _busy(state, gens.read_pointer(root))
    if running:
        raise CollectionConflict(f"collection {coll.name!r} is being reindexed by job {running}: wait or cancel it")
    spec = {**options, "collection": coll.name, "embedder": resolved, "embedder_name": embedder}
    job = state.jobs.create(collection=coll.name, kind=JobKind.REINDEX, payload=[spec])
    state.queue.submit(job.id)
    return job


def submit_switch(*, state: AppState, collection: str, kind: JobKind) -> Job:
    """Queue a promote (of the finished generation waiting for it) or a rollback (to the kept one)."""
    coll = state.collections.get(collection)
    pointer = gens.read_pointer(state.collections.root / coll.name)
    if kind == JobKind.PROMOTE and (pointer.building is None or not pointer.ready):
        raise NothingToSwitch(f"collection {coll.name!r} has no finished generation waiting for promotion")
    if kind == JobKind.ROLLBACK and pointer.previous is None:
        raise NothingToSwitch(f"collection {coll.name!r} keeps no previous generation to roll back to")
    job = state.jobs.create(collection=coll.name, kind=kind, payload=[{"collection": coll.name}])
    state.queue.submit(job.id)
    return job


def generation_info(*, state: AppState, collection: str) -> dict[str, Any]:
    return gens.describe(state.collections.root / collection)


__all__ = ["NothingToSwitch", "UnknownDataset", "generation_info", "submit_reindex", "submit_switch"]
