"""Generations of a collection: its documents embedded by another model, built beside the one that serves.

In the collection's directory `<data dir>/collections/<name>/`:
- generation 0 is the collection directory itself (every collection starts there, so a collection that was never
  reindexed has nothing else and older data directories need no migration);
- generation n > 0 is `generations/<n>/`, a whole collection directory of its own (settings, doc store, segments);
- `generations.json` names the generation searches read (`current`), the one kept for rollback (`previous`), the
  one being built (`building`, with its job and whether it is complete, `ready`), and the job that last switched.

The pointer file is replaced atomically under `.generations.lock`, and it is the one commit point of a promotion
or a rollback: every process serves what it names (the background reader follows it, writers check it after they
take their lock), so a search sees the old generation or the new one, never a mix and never an error.

A generation is deleted only once the pointer no longer names it: the rollback target when a promotion replaces
it (after the new pointer is written), a building one when its reindex is refused, cancelled or replaced. So at
most three are on disk while a reindex builds or its generation waits for promotion (serving, rollback target,
new), two otherwise; a crash between a pointer's replacement and a deletion leaves an unnamed directory, which
`drop_unnamed` (after the next switch) or `clean` (at start-up) removes.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from indexing.collection import SETTINGS_FILE, Collection, CollectionSettings, load_settings
from indexing.shards import ShardedCollection
from velaio.files import file_lock, write_atomic

GEN_DIR = "generations"
POINTER = "generations.json"
LOCK = ".generations.lock"
JOB_LOCK = ".generation-job.lock"  # held by the one run of a reindex, promote or rollback job (job_lock)
# What generation 0 keeps when its data goes: the collection's own files (its name on disk, the generations).
KEEP = frozenset({SETTINGS_FILE, POINTER, LOCK, JOB_LOCK, GEN_DIR})


@dataclass(frozen=True)
class Pointer:
    current: int = 0
    previous: int | None = None
    building: int | None = None
    job: str | None = None  # the reindex job that builds `building`
    ready: bool = False  # `building` is complete and waits for POST /promote
    last: int = 0  # the highest number given out: numbers are never reused
    switched_by: str | None = None  # the job whose switch this pointer is (a resumed job then knows it is done)
    names: dict[str, str] | None = None  # generation -> the registry name of its embedder, as a request gave it
    reencode: bool = False  # the reindex that builds `building` encodes every document (its promotion too)

    def kept(self) -> set[int]:
        return {g for g in (self.current, self.previous, self.building) if g is not None}

    def name_of(self, gen: int) -> str | None:
        return (self.names or {}).get(str(gen))


_cache: dict[Path, tuple[tuple[int, int, int], Pointer]] = {}


def read_pointer(root: Path) -> Pointer:
    """The collection's generations; no file is generation 0 alone. Parsed again only when the file changed
    (the background reader asks every tick)."""
    path = root / POINTER
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Pointer()
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    hit = _cache.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    data = json.loads(path.read_text())
    unknown = sorted(set(data) - {f.name for f in fields(Pointer)})
    if unknown:  # a field of a newer release, whose meaning this one cannot honour
        raise ValueError(f"{path} has fields this release does not know, {unknown}: a newer release wrote it")
    pointer = Pointer(**data)
    _cache[path] = (stamp, pointer)
    return pointer


def write_pointer(root: Path, pointer: Pointer) -> None:
    """The caller holds `lock(root)`."""
    write_atomic(root / POINTER, json.dumps(asdict(pointer), indent=2).encode())


@contextmanager
def lock(root: Path) -> Iterator[None]:
    """Serialises every change of the pointer and of generation directories, across processes."""
    with file_lock(root / LOCK):
        yield


@contextmanager
def job_lock(root: Path) -> Iterator[None]:
    """Held for the whole run of a generation job (reindex, promote, rollback), across processes: one job at a time
    per collection, so a job delivered twice (two workers at once) runs once, then once more only to find it ended.
    Taken before `lock(root)` and the writer locks, never while holding them."""
    with file_lock(root / JOB_LOCK):
        yield


def gen_root(root: Path, gen: int) -> Path:
    return root if gen == 0 else root / GEN_DIR / str(gen)


def serving_root(root: Path) -> Path:
    """The directory of the generation searches read now."""
    return gen_root(root, read_pointer(root).current)


def collection_root(coll: Collection) -> Path:
    """The collection's own directory, whichever generation `coll` is."""
    return coll.root.parent.parent if coll.root.parent.name == GEN_DIR else coll.root


def generation_of(coll: Collection) -> int:
    return int(coll.root.name) if coll.root.parent.name == GEN_DIR else 0


def is_serving(coll: Collection) -> bool:
    return serving_root(collection_root(coll)) == coll.root


def open_generation(root: Path, gen: int) -> Collection:
    path = gen_root(root, gen)
    settings = load_settings(path)
    return ShardedCollection(path, settings) if settings.shards > 1 else Collection(path, settings)


@contextmanager
def serving_writer(coll: Collection, reopen: Callable[[Collection], Collection]) -> Iterator[Collection]:
    """The writer lock of the generation that serves now. A writer that waited for the lock while a promotion or
    a rollback took place would otherwise write into the generation that was just retired: after the lock is
    taken, the pointer on disk is read again and, when it moved, the writer follows it (`reopen`)."""
    for _ in range(8):
        with coll.writer():
            if is_serving(coll):
                yield coll
                return
        coll = reopen(coll)
    raise RuntimeError(f"collection {coll.name!r} switched generations repeatedly while a writer waited")


def new_generation(root: Path, settings: CollectionSettings) -> tuple[int, Collection]:
    """A new, empty generation (the caller holds `lock(root)`): built aside, renamed into place whole, so a
    directory named by a number is always a complete collection. The pointer does not name it yet."""
    pointer = read_pointer(root)
    existing = [int(p.name) for p in (root / GEN_DIR).glob("*") if p.name.isdigit()]
    gen = max([pointer.last, pointer.current, *existing]) + 1
    (root / GEN_DIR).mkdir(exist_ok=True)
    tmp = root / GEN_DIR / f".new-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        coll = ShardedCollection(tmp, settings) if settings.shards > 1 else Collection(tmp, settings)
        coll.check_consistency()  # an empty published index: searchable (and scorable by a gate) at once
        coll.close()
        write_atomic(tmp / SETTINGS_FILE, json.dumps(settings.to_json(), indent=2).encode())
        tmp.rename(gen_root(root, gen))
    except BaseException:  # a full disk, say: nothing half made is left
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return gen, open_generation(root, gen)


def drop(root: Path, gen: int) -> None:
    """Delete a generation's files (the caller holds `lock(root)` and the pointer no longer names it).
    Generation 0's data lives in the collection directory: everything there goes but the collection's own files."""
    if gen != 0:
        path = gen_root(root, gen)
        if path.exists():
            trash = root / GEN_DIR / f".trash-{uuid.uuid4().hex}"
            path.rename(trash)  # gone at once; a crash during the removal leaves a dot-name clean() removes
            shutil.rmtree(trash, ignore_errors=True)
        return
    for entry in root.iterdir():
        if entry.name in KEEP:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def drop_unnamed(root: Path) -> list[int]:
    """Delete every generation on disk that the pointer does not name (the caller holds `lock(root)`: a directory
    is named in the same hold that creates it, so under the lock one that is not named is done with). Returns them."""
    kept = read_pointer(root).kept()
    gone = [gen for gen in on_disk(root) if gen not in kept]
    for gen in gone:
        drop(root, gen)
    return gone


def _has_gen0_data(root: Path) -> bool:
    return any(e.name not in KEEP for e in root.iterdir())


def clean(root: Path, job_alive: Callable[[str], bool]) -> list[str]:
    """Remove what no pointer names: generations of a reindex that failed, was cancelled or whose job is gone,
    half-built or half-deleted directories a crash left, a rollback target a promotion replaced when a crash came
    before its deletion, generation 0's data once it is neither current nor kept.
    A generation whose reindex job is still unfinished stays: that job resumes and completes it. Returns what went."""
    removed: list[str] = []
    with lock(root):
        pointer = read_pointer(root)
        if pointer.building is not None and not (pointer.job and job_alive(pointer.job)) and not pointer.ready:
            removed.append(f"generation {pointer.building} (its reindex is over)")
            pointer = replace(pointer, building=None, job=None)
            write_pointer(root, pointer)
        kept = pointer.kept()
        gens = root / GEN_DIR
        if gens.is_dir():
            for entry in gens.iterdir():
                if entry.name.isdigit() and int(entry.name) in kept:
                    continue
                removed.append(f"{GEN_DIR}/{entry.name}")
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        if 0 not in kept and _has_gen0_data(root):
            removed.append("generation 0")
            drop(root, 0)
    return removed


def on_disk(root: Path) -> list[int]:
    """The generations whose data is on disk (tests and the bench count them)."""
    gens = [int(p.name) for p in (root / GEN_DIR).glob("*") if p.name.isdigit()] if (root / GEN_DIR).is_dir() else []
    return sorted(([0] if _has_gen0_data(root) else []) + gens)


def describe(root: Path) -> dict[str, Any]:
    """What GET /collections/{name} shows: each generation the pointer names, with its embedder."""
    pointer = read_pointer(root)

    def one(gen: int | None) -> dict[str, Any] | None:
        if gen is None:
            return None
        try:
            embedder = load_settings(gen_root(root, gen)).embedder
        except (OSError, ValueError, KeyError):
            return None  # removed meanwhile
        return {"generation": gen, "embedder": embedder, "embedder_name": pointer.name_of(gen)}

    building = one(pointer.building)
    if building is not None:
        building.update(job=pointer.job, ready=pointer.ready)
    return {"current": one(pointer.current), "previous": one(pointer.previous), "building": building}
