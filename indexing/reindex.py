"""The jobs that build and switch generations (indexing/generations.py): reindex, promote, rollback.

A reindex makes a new generation from the serving one's stored documents with another embedder, while the
serving one keeps taking searches and writes; it catches up with those writes (indexing/gen_sync.py), scores both
on a judged set when a gate is asked for, and switches (or waits for POST /promote). The switch itself holds the
serving generation's writer lock, so no write lands between the last catch-up and the pointer's replacement.

Every step is safe to run again: a job killed anywhere resumes from what the pointer and the doc stores hold."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from indexing import generations as gens
from indexing.chunking import ChunkingParams
from indexing.collection import Collection, CollectionNotFound
from indexing.fusion_choice import refresh_choice
from indexing.gate import judged_set, ndcg_at_10
from indexing.gen_sync import sync
from indexing.jobs import TERMINAL, JobKind, JobNotFound, JobStatus, JobStore
from indexing.store import CollectionStore
from indexing.vector_reuse import VectorReuse
from models import EmbedderCache

log = logging.getLogger("vela.reindex")
CATCH_UP_PASSES = 3  # unlocked catch-ups before the final one, which holds the writers back
CALM = 64  # documents left to embed at which the final, locked catch-up starts


class JobCancelled(Exception):
    pass


class GateRefused(Exception):
    """The new generation scored below the serving one by more than the tolerance."""


def job_alive(jobs: JobStore) -> Callable[[str], bool]:
    def alive(job_id: str) -> bool:
        try:
            return jobs.get(job_id).status not in TERMINAL
        except JobNotFound:
            return False

    return alive


def clean_all(collections: CollectionStore, jobs: JobStore) -> None:
    """At start-up: generations no pointer names, and those of reindexes that are over, are removed."""
    for name in collections.names():
        removed = gens.clean(collections.root / name, job_alive(jobs))
        if removed:
            log.info("generations cleaned", extra={"collection": name, "removed": removed})


def run_generation_job(
    *,
    job_id: str,
    jobs: JobStore,
    collections: CollectionStore,
    embedders: EmbedderCache,
    on_progress: Callable[[int, int], None] | None = None,
) -> JobStatus:
    job = jobs.get(job_id)
    spec = jobs.payload(job_id)[0]
    runner = {JobKind.REINDEX: _reindex, JobKind.PROMOTE: _promote, JobKind.ROLLBACK: _rollback}[job.kind]
    try:
        result = runner(job_id, spec, jobs, collections, embedders, on_progress)
    except JobCancelled:
        jobs.finish(job_id, JobStatus.CANCELLED)
        return JobStatus.CANCELLED
    except GateRefused as exc:
        jobs.finish(job_id, JobStatus.FAILED, error=str(exc))
        return JobStatus.FAILED
    if job.kind != JobKind.REINDEX:  # a switch is one step: done 1 of 1 (a reindex counts its documents)
        jobs.progress(job_id, 1, 1)
    jobs.set_result(job_id, result)
    jobs.finish(job_id, JobStatus.SUCCEEDED)
    return JobStatus.SUCCEEDED


def _root(collections: CollectionStore, name: str) -> tuple[Path, Collection]:
    coll = collections.get(name)
    return collections.root / coll.name, coll


def _reindex(
    job_id: str,
    spec: dict[str, Any],
    jobs: JobStore,
    collections: CollectionStore,
    embedders: EmbedderCache,
    on_progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    root, source = _root(collections, spec["collection"])
    pointer = gens.read_pointer(root)
    if pointer.switched_by == job_id or (pointer.ready and pointer.job == job_id):
        return jobs.get(job_id).result or {"generation": pointer.current}  # it was done before a crash
    embedder = embedders.get(spec["embedder"])
    target = _begin(root, source, spec, job_id, embedder.dim, alive=job_alive(jobs))
    gen = gens.generation_of(target)

    def stop() -> bool:
        return jobs.cancel_requested(job_id) or not root.exists()  # cancelled, or the collection deleted

    def progress(done: int, total: int) -> None:
        jobs.progress(job_id, done, total)
        if on_progress is not None:
            on_progress(done, total)

    reuse = _vector_reuse(embedders, source, bool(spec.get("reencode")))
    t0 = time.monotonic()
    documents = {"embedded": 0, "copied": 0}  # encoded by the new embedder, or stored with the source's vectors
    for attempt in range(1 + CATCH_UP_PASSES):
        source = collections.get(spec["collection"])  # a write job may have published meanwhile
        with target.writer():
            outcome = sync(
                source,
                target,
                embedder,
                should_stop=stop,
                on_progress=progress if attempt == 0 else None,
                reuse=reuse,
            )
        documents["embedded"] += outcome.embedded
        documents["copied"] += outcome.copied
        if outcome.cancelled or stop():
            _abandon(root, gen)
            raise JobCancelled()
        if attempt > 0 and outcome.changed <= CALM:
            break
    _choose_fusion(collections, source, target, embedder)
    result: dict[str, Any] = {
        "generation": gen,
        "previous": gens.generation_of(source),
        "build_s": round(time.monotonic() - t0, 3),
        "documents": documents,
    }
    if spec.get("reason"):
        result["reason"] = spec["reason"]
    if spec.get("embedder_name"):  # a name, never the server's folder (a refresh of an unnamed one has none)
        result["embedder"] = spec["embedder_name"]
    if spec.get("gate"):
        result["gate"] = _gate(collections, embedders, source, target, embedder, spec["gate"])
        jobs.set_result(job_id, result)
        if not result["gate"]["passed"]:
            _abandon(root, gen)
            g = result["gate"]
            raise GateRefused(
                f"gate refused generation {gen}: NDCG@10 {g['new']:.4f} (new) < {g['old']:.4f} (serving) "
                f"- {g['tolerance']} in {g['mode']} mode; the serving generation stays"
            )
    if spec.get("promote") == "manual":
        with gens.lock(root):
            gens.write_pointer(root, replace(gens.read_pointer(root), ready=True))
        result["promoted"] = False
        return result
    _switch(collections, root, source, target, embedder, job_id, rollback=False, reuse=reuse)
    result["promoted"] = True
    return result


def _begin(root: Path, source: Collection, spec: dict[str, Any], job_id: str, dim: int, *, alive: Any) -> Collection:
    """The generation this job builds: the one the pointer names for it (a resumed job), else a new one. The
    previous generation goes first (it was kept until this reindex), so at most two are on disk."""
    with gens.lock(root):
        pointer = gens.read_pointer(root)
        if pointer.building is not None and pointer.job == job_id:
            return gens.open_generation(root, pointer.building)
        if pointer.building is not None and pointer.job and alive(pointer.job) and not pointer.ready:
            raise RuntimeError(f"collection {source.name!r} is being reindexed by job {pointer.job}")
        stale = [g for g in (pointer.building, pointer.previous) if g is not None and g != pointer.current]
        if stale:  # an unpromoted or abandoned one, and the one kept for rollback: named no more, then deleted
            pointer = replace(pointer, building=None, previous=None, ready=False)
            gens.write_pointer(root, pointer)
            for old in stale:
                gens.drop(root, old)
        chunking = ChunkingParams(**spec["chunking"]) if spec.get("chunking") else source.settings.chunking
        settings = replace(
            source.settings, embedder=spec["embedder"], dim=dim, chunking=chunking, created_at=time.time()
        )
        gen, target = gens.new_generation(root, settings)
        names = {**(pointer.names or {}), str(gen): spec.get("embedder_name") or ""}
        reencode = bool(spec.get("reencode"))
        pointer = replace(pointer, building=gen, job=job_id, ready=False, last=gen, names=names, reencode=reencode)
        gens.write_pointer(root, pointer)
        return target


def _choose_fusion(collections: CollectionStore, source: Collection, target: Collection, embedder: Any) -> None:
    """A fusion the serving generation chose by itself (without labels, for its embedder) is chosen again for the
    new embedder before the new generation is gated or served; one an operator set is kept as it is."""
    if not (source.settings.fusion or {}).get("chosen"):
        return
    try:
        refresh_choice(target, embedder, collections.fanout)
    except Exception:  # the copied choice stays in force: a worse fusion, never a failed reindex
        log.exception("fusion choice failed", extra={"collection": target.name})


def _abandon(root: Path, gen: int) -> None:
    if not root.exists():
        return  # the collection was deleted, every generation with it
    with gens.lock(root):
        pointer = gens.read_pointer(root)
        if pointer.building == gen:
            gens.write_pointer(root, replace(pointer, building=None, job=None, ready=False))
        if gen not in gens.read_pointer(root).kept():
            gens.drop(root, gen)


def _gate(
    collections: CollectionStore,
    embedders: EmbedderCache,
    source: Collection,
    target: Collection,
    embedder: Any,
    gate: dict[str, Any],
) -> dict[str, Any]:
    judged = judged_set(collections.root.parent, gate)
    mode = gate.get("mode", "dense")
    tolerance = float(gate.get("tolerance", 0.0))
    fanout = collections.fanout
    old = ndcg_at_10(source, embedders.get(source.settings.embedder), judged, mode, fanout)
    new = ndcg_at_10(target, embedder, judged, mode, fanout)
    return {
        "metric": "ndcg@10",
        "mode": mode,
        "queries": len(judged.queries),
        "old": round(old, 6),
        "new": round(new, 6),
        "tolerance": tolerance,
        "passed": new >= old - tolerance,
    }


def _vector_reuse(embedders: EmbedderCache, source: Collection, reencode: bool) -> VectorReuse | None:
    """How a reindex from `source` may copy document vectors; None (every document encoded) when it was asked to
    re-encode, or when the embedder the source was encoded with can no longer be loaded (a removed model)."""
    if reencode:
        return None
    try:
        return VectorReuse(embedders.get(source.settings.embedder))
    except Exception as e:  # noqa: BLE001 - a copy is an optimisation: never the reason a reindex fails
        log.warning("current embedder not loadable: every document is encoded", extra={"error": str(e)})
        return None


def _switch(
    collections: CollectionStore,
    root: Path,
    source: Collection,
    target: Collection,
    embedder: Any,
    job_id: str,
    *,
    rollback: bool,
    reuse: VectorReuse | None = None,
) -> None:
    """Make `target` the generation searches read, `source` the one kept. Under the generations lock and both
    writer locks (source, then target: one order everywhere), the last writes are caught up, the target is
    published, and the pointer is replaced: the one commit point, after which every process follows."""

    with gens.lock(root), source.writer(), target.writer():
        pointer = gens.read_pointer(root)
        if pointer.current != gens.generation_of(source):
            raise RuntimeError("the serving generation changed before the switch: run it again")
        sync(source, target, embedder, reuse=reuse)
        old, new = gens.generation_of(source), gens.generation_of(target)
        if rollback:
            pointer = replace(pointer, current=new, previous=old, switched_by=job_id)
        else:
            pointer = replace(pointer, current=new, previous=old, building=None, job=None, ready=False)
            pointer = replace(pointer, switched_by=job_id)
        gens.write_pointer(root, pointer)
    collections.follow(source)  # this process switches now (others at their reader's next tick)


def _switch_job(rollback: bool) -> Callable[..., dict[str, Any]]:
    """A promote (rollback False: to the finished generation) or rollback (to the previous one) job's runner."""

    def run(
        job_id: str,
        spec: dict[str, Any],
        jobs: JobStore,
        collections: CollectionStore,
        embedders: EmbedderCache,
        on_progress: Callable[[int, int], None] | None,
    ) -> dict[str, Any]:
        root, source = _root(collections, spec["collection"])
        pointer = gens.read_pointer(root)
        if pointer.switched_by == job_id:  # a resumed job whose switch had happened
            return {"generation": pointer.current, "previous": pointer.previous}
        if rollback and pointer.previous is None:
            raise RuntimeError(f"collection {source.name!r} keeps no previous generation to roll back to")
        if not rollback and (pointer.building is None or not pointer.ready):
            raise RuntimeError(f"collection {source.name!r} has no finished generation waiting for promotion")
        target = gens.open_generation(root, pointer.previous if rollback else pointer.building)  # type: ignore[arg-type]
        embedder = embedders.get(target.settings.embedder)
        reencode = not rollback and pointer.reencode  # the reindex that built it asked to encode everything
        reuse = _vector_reuse(embedders, source, reencode)
        _switch(collections, root, source, target, embedder, job_id, rollback=rollback, reuse=reuse)
        return {"generation": gens.generation_of(target), "previous": gens.generation_of(source)}

    return run


_promote = _switch_job(rollback=False)
_rollback = _switch_job(rollback=True)


__all__ = ["CollectionNotFound", "clean_all", "run_generation_job"]
