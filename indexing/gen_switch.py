"""Switching the generation a collection serves (indexing/generations.py): the promote and rollback jobs, and the
switch a reindex (indexing/reindex.py) ends with.

A switch catches the target up with the serving generation's last writes and replaces the pointer, holding the
generations lock and both writer locks: that replacement is the one commit point, after which every process
follows. A promotion makes the generation that served the one kept for rollback, and only then, after the new
pointer is written, deletes the one kept until now: a reindex that is refused, fails or is cancelled has switched
nothing and so costs nothing, and a crash between the two steps leaves an unnamed directory that the resumed job or
start-up cleaning (`generations.clean`) removes. On disk: serving and rollback target, plus the generation a
reindex builds (or one that waits for promotion) while there is one; three at most."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from indexing import generations as gens
from indexing.collection import Collection
from indexing.gen_sync import sync
from indexing.jobs import JobStore
from indexing.store import CollectionStore
from indexing.vector_reuse import VectorReuse
from models import EmbedderCache

log = logging.getLogger("vela.reindex")


class SwitchedAlready(Exception):
    """The switch a job asked for is the pointer already: another run of the same job made it (an entry delivered
    twice). That run reports the job; this one only finds it done."""


def root_and_serving(collections: CollectionStore, name: str) -> tuple[Path, Collection]:
    """The collection's own directory (where its pointer is) and the generation that serves it now, as the pointer
    on disk names it. The store's copy can be older: a `vela worker` runs no background reader, so after a switch
    made elsewhere it still holds the generation it opened first (an API process, for a reader tick). A rollback
    from that generation to itself took its writer lock twice and waited for itself for ever."""
    coll = collections.follow(collections.get(name))
    return collections.root / coll.name, coll


def vector_reuse(embedders: EmbedderCache, source: Collection, reencode: bool) -> VectorReuse | None:
    """How a reindex from `source` may copy document vectors; None (every document encoded) when it was asked to
    re-encode, or when the embedder the source was encoded with can no longer be loaded (a removed model)."""
    if reencode:
        return None
    try:
        return VectorReuse(embedders.get(source.settings.embedder))
    except Exception as e:  # noqa: BLE001 - a copy is an optimisation: never the reason a reindex fails
        log.warning("current embedder not loadable: every document is encoded", extra={"error": str(e)})
        return None


def retire(root: Path) -> list[int]:
    """Delete the generations the pointer no longer names: the rollback target a promotion replaced (or one a
    crash left before its deletion). Under the generations lock; idempotent."""
    if not root.exists():
        return []  # the collection was deleted, every generation with it
    with gens.lock(root):
        gone = gens.drop_unnamed(root)
    if gone:
        log.info("generations retired", extra={"collection": root.name, "removed": gone})
    return gone


def switch(
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
    published, and the pointer is replaced: the one commit point, after which every process follows. The rollback
    target a promotion replaces is deleted after that, once the writer locks are released (a rollback swaps the
    two and deletes nothing)."""

    with gens.lock(root), source.writer(), target.writer():
        pointer = gens.read_pointer(root)
        if pointer.current != gens.generation_of(source):
            if pointer.switched_by == job_id and pointer.current == gens.generation_of(target):
                raise SwitchedAlready(job_id)
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
    try:
        retire(root)
    except OSError:  # the switch is done and stays so: what is left, unnamed, goes at the next switch or start-up
        log.exception("retired generation not deleted", extra={"collection": source.name})


def switched(root: Path) -> dict[str, Any]:
    """What a promote or rollback job whose switch the pointer already is reports: the switch (the rollback target
    it replaced deleted, if a crash came first)."""
    retire(root)
    pointer = gens.read_pointer(root)
    return {"generation": pointer.current, "previous": pointer.previous}


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
        root, source = root_and_serving(collections, spec["collection"])
        pointer = gens.read_pointer(root)
        if pointer.switched_by == job_id:  # a resumed job whose switch had happened (its deletion perhaps not)
            return switched(root)
        if rollback and pointer.previous is None:
            raise RuntimeError(f"collection {source.name!r} keeps no previous generation to roll back to")
        if not rollback and (pointer.building is None or not pointer.ready):
            raise RuntimeError(f"collection {source.name!r} has no finished generation waiting for promotion")
        target = gens.open_generation(root, pointer.previous if rollback else pointer.building)  # type: ignore[arg-type]
        embedder = embedders.get(target.settings.embedder)
        reencode = not rollback and pointer.reencode  # the reindex that built it asked to encode everything
        reuse = vector_reuse(embedders, source, reencode)
        try:
            switch(collections, root, source, target, embedder, job_id, rollback=rollback, reuse=reuse)
        except SwitchedAlready:  # by another run of this job meanwhile
            return switched(root)
        return {"generation": gens.generation_of(target), "previous": gens.generation_of(source)}

    return run


promote = _switch_job(rollback=False)
rollback = _switch_job(rollback=True)
