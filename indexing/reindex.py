"""The job that builds a generation (indexing/generations.py): reindex; promote and rollback, the jobs that only
switch, are in indexing/gen_switch.py, and run_generation_job runs all three.

A reindex makes a new generation from the serving one's stored documents with another embedder, while the
serving one keeps taking searches and writes; it catches up with those writes (indexing/gen_sync.py), scores both
on a judged set when a gate is asked for, and switches (or waits for POST /promote). The switch itself holds the
serving generation's writer lock, so no write lands between the last catch-up and the pointer's replacement.

Until that switch a reindex changes nothing but the generation it builds: the serving generation and the one kept
for rollback stay as they are, so a refused gate, a failure or a cancel leaves both (the switch, not the reindex,
retires the old rollback target). Three generations at most are on disk while a reindex runs, two otherwise.

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
from indexing.gen_switch import (
    SwitchedAlready,
    promote,
    retire,
    rollback,
    root_and_serving,
    switch,
    vector_reuse,
)
from indexing.gen_sync import sync
from indexing.jobs import TERMINAL, JobKind, JobNotFound, JobStatus, JobStore, end_job
from indexing.store import CollectionStore
from models import Embedder, EmbedderCache

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
    root, _ = root_and_serving(collections, job.collection)
    # One run at a time: a second run of this job (its entry delivered twice, or taken over from a worker that
    # still runs it) waits here for the first to end, then finds the job ended and leaves its status and result.
    with gens.job_lock(root):
        job = jobs.get(job_id)
        if job.status in TERMINAL:
            return job.status
        spec = jobs.payload(job_id)[0]
        runner = {JobKind.REINDEX: _reindex, JobKind.PROMOTE: promote, JobKind.ROLLBACK: rollback}[job.kind]
        try:
            result = runner(job_id, spec, jobs, collections, embedders, on_progress)
        except JobCancelled:
            return end_job(jobs, job_id, JobStatus.CANCELLED)
        except GateRefused as exc:
            return end_job(jobs, job_id, JobStatus.FAILED, error=str(exc))
        # A switch counts no documents (its total and done stay 0: no progress, speed or document count to show);
        # a reindex counted its own.
        return end_job(jobs, job_id, JobStatus.SUCCEEDED, result=result)


def _reindex(
    job_id: str,
    spec: dict[str, Any],
    jobs: JobStore,
    collections: CollectionStore,
    embedders: EmbedderCache,
    on_progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    root, source = root_and_serving(collections, spec["collection"])
    pointer = gens.read_pointer(root)
    if pointer.switched_by == job_id:  # switched before a crash, which may have come before the old target went
        retire(root)
        return _promoted(jobs, job_id, {"generation": pointer.current, "previous": pointer.previous})
    if pointer.ready and pointer.job == job_id:  # built before a crash: it waits for POST /promote
        return {**(jobs.get(job_id).result or {"generation": pointer.building}), "promoted": False}
    embedder = embedders.get(spec["embedder"])
    target = _begin(root, source, spec, job_id, embedder.dim, alive=job_alive(jobs))
    gen = gens.generation_of(target)

    try:
        return _build(job_id, spec, jobs, collections, embedders, on_progress, root, target, embedder)
    except (JobCancelled, GateRefused):
        raise  # each has dropped what it built where that was still there
    except Exception:
        # A failed build (a gate's judged set that cannot be read, a fault while encoding) names its generation no
        # more: left "building", it kept the model it uses from being removed until another reindex replaced it.
        _abandon(root, gen)
        raise


def _build(
    job_id: str,
    spec: dict[str, Any],
    jobs: JobStore,
    collections: CollectionStore,
    embedders: EmbedderCache,
    on_progress: Callable[[int, int], None] | None,
    root: Path,
    target: Collection,
    embedder: Embedder,
) -> dict[str, Any]:
    """Build the generation `target` (sync and catch-up passes), gate it, and promote it or mark it ready."""
    gen = gens.generation_of(target)
    _, source = root_and_serving(collections, spec["collection"])

    def stop() -> bool:
        return jobs.cancel_requested(job_id) or not root.exists()  # cancelled, or the collection deleted

    def progress(done: int, total: int) -> None:
        jobs.progress(job_id, done, total)
        if on_progress is not None:
            on_progress(done, total)

    reuse = vector_reuse(embedders, source, bool(spec.get("reencode")))
    t0 = time.monotonic()
    documents = {"embedded": 0, "copied": 0}  # encoded by the new embedder, or stored with the source's vectors
    for attempt in range(1 + CATCH_UP_PASSES):
        _, source = root_and_serving(collections, spec["collection"])  # a write job may have published meanwhile
        try:
            with target.writer():
                outcome = sync(
                    source,
                    target,
                    embedder,
                    should_stop=stop,
                    # The catch-up passes too: writes made during the build grow the total, and a job held at
                    # its first pass's 100 % while it embeds them looked hung.
                    on_progress=progress,
                    reuse=reuse,
                )
        except Exception:
            if stop():  # deleted (or cancelled) under the build, whose files went with it: a cancel, not a fault
                raise JobCancelled() from None
            raise
        documents["embedded"] += outcome.embedded
        documents["copied"] += outcome.copied
        if attempt == 0:  # what an earlier run of this job built (a resumed reindex), so the counts add up
            documents["resumed"] = outcome.unchanged
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
    # Recorded before the switch: a run of this job that finds the switch made (after a crash, or as the second of
    # two runs at once) reports this one's figures.
    jobs.set_result(job_id, result)
    if spec.get("gate") and not result["gate"]["passed"]:
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
    try:
        switch(collections, root, source, target, embedder, job_id, rollback=False, reuse=reuse)
    except SwitchedAlready:  # by another run of this job meanwhile: that run's figures, if it recorded them
        return _promoted(jobs, job_id, result)
    result["promoted"] = True
    return result


def _promoted(jobs: JobStore, job_id: str, fallback: dict[str, Any]) -> dict[str, Any]:
    """The result of a reindex whose switch the pointer already is: the one its promoting run recorded before the
    switch (its documents counted), else `fallback`; promoted."""
    return {**(jobs.get(job_id).result or fallback), "promoted": True}


def _begin(root: Path, source: Collection, spec: dict[str, Any], job_id: str, dim: int, *, alive: Any) -> Collection:
    """The generation this job builds: the one the pointer names for it (a resumed job), else a new one, which
    replaces a finished one that waits for promotion or one an earlier reindex left. The serving generation and
    the one kept for rollback stay: only a switch retires the rollback target (indexing/gen_switch.py), so a
    reindex that never switches costs neither, and at most three generations are on disk while it runs."""
    with gens.lock(root):
        pointer = gens.read_pointer(root)
        if pointer.building is not None and pointer.job == job_id:
            return gens.open_generation(root, pointer.building)
        if pointer.building is not None and pointer.job and alive(pointer.job) and not pointer.ready:
            raise RuntimeError(f"collection {source.name!r} is being reindexed by job {pointer.job}")
        stale = pointer.building
        if stale is not None:  # an unpromoted or abandoned one: named no more, then deleted
            pointer = replace(pointer, building=None, job=None, ready=False)
            gens.write_pointer(root, pointer)
            if stale not in pointer.kept():
                gens.drop(root, stale)
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
    """A refused or cancelled reindex: the generation it built is named no more and deleted; the serving one and
    the one kept for rollback stay as they were."""
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


__all__ = ["CollectionNotFound", "clean_all", "run_generation_job"]
