"""All collections of a data directory: opened once per process, kept fresh by a background reader."""

from __future__ import annotations

import contextlib
import gc
import logging
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from indexing.aliases import AliasStore
from indexing.collection import (
    NAME_RE,
    SETTINGS_FILE,
    Collection,
    CollectionConflict,
    CollectionNotFound,
    CollectionSettings,
    IndexNotReady,
    load_settings,
    validate_name,
)
from indexing.collection_make import make_in_place, open_collection, same_embedder
from indexing.collection_settings import COLLECTIONS_FOLDER
from indexing.engine import LOCAL_FANOUT
from indexing.generations import serving_root
from indexing.manifest import ManifestError
from indexing.refresh_backoff import RefreshBackoff
from indexing.segment import SegmentError
from indexing.shard_budget import ShardCap, check_new_collection, check_shard_cap
from velaio.files import file_lock

log = logging.getLogger("vela.collections")
REFRESH_S = 0.05  # how often the background reader looks for newly published manifests
# What reading a collection raises when its files go from under the read (deleted meanwhile, or damaged).
READ_FAULTS = (IndexNotReady, ManifestError, SegmentError, sqlite3.OperationalError, FileNotFoundError)
CREATE_LOCK = "collections.lock"  # in the data directory: held while a collection is checked against the caps and made


class CollectionStore:
    """All collections under `<data_dir>/collections/`, opened once and shared."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.root = data_dir / COLLECTIONS_FOLDER
        self.root.mkdir(parents=True, exist_ok=True)
        self.aliases = AliasStore(data_dir)  # names that point at a collection; `resolve` follows them
        self._open: dict[str, Collection] = {}
        self._inode: dict[str, int] = {}  # each open collection's directory: another process may delete it
        self._lock = threading.Lock()
        # Where searches run: this process's shard views, or Ray actors (indexing/ray_shards.py).
        self.fanout: Any = LOCAL_FANOUT
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        # Called with a newly promoted generation before searches switch to it (the API loads its query encoder).
        self.on_generation: Callable[[Collection], None] | None = None
        # A collection the reader cannot refresh (or whose new generation it cannot open) is tried again later.
        self.refresh_backoff = RefreshBackoff(log, "collection not refreshed", "collection refreshed again")
        self.follow_backoff = RefreshBackoff(log, "generation not followed", "generation followed again")
        # The most shards the data directory may hold (None: no cap); set by the process that serves it.
        self.shard_cap: ShardCap | None = None

    def use_ray(self, address: str, *, cpus_per_shard: float = 1.0) -> None:
        """Search shards on Ray actors (the only place a serving process imports Ray)."""
        from indexing.ray_shards import RayFanout

        self.fanout = RayFanout(address, cpus_per_shard=cpus_per_shard)

    # --- the background reader: new manifests are loaded here, never by a request -----------------
    def refresh(self, coll: Collection) -> bool:
        coll.reload_settings()  # a schema declared by another process (a `vela worker`): filters are parsed with it
        try:
            changed = coll.refresh(self.fanout)
        except (IndexNotReady, ManifestError, SegmentError, OSError) as exc:
            if self._gone(coll.name):  # deleted while this tick read it: no failure to report
                return False
            self.refresh_backoff.failed(coll.name, str(exc))
            return False
        self.refresh_backoff.succeeded(coll.name)
        return changed

    def published(self, coll: Collection) -> None:
        """A writer of this process published: where this process serves searches, load it now."""
        if self._reader is not None:
            self.refresh(coll)

    def catch_up(self, name: str) -> None:
        """Load what a writer elsewhere (a `vela worker`) published for `name`, if this process serves it:
        a job reported succeeded is then searchable at once, not a reader tick later."""
        with self._lock:
            coll = self._open.get(name)
        if coll is not None and self._reader is not None:
            self.refresh(coll)

    def refresh_all(self) -> None:
        with self._lock:
            for name in [n for n in self._open if self._gone(n)]:
                self._forget(name)
            colls = list(self._open.values())
        for coll in colls:
            if self.follow_backoff.due(coll.name):
                try:
                    coll = self.follow(coll)
                except (IndexNotReady, ManifestError, SegmentError, OSError, ValueError) as exc:
                    self.follow_backoff.failed(coll.name, str(exc))
                else:
                    self.follow_backoff.succeeded(coll.name)
            if self.refresh_backoff.due(coll.name):
                self.refresh(coll)

    def follow(self, coll: Collection) -> Collection:
        """The generation of `coll`'s collection that serves now (indexing/generations.py). When a promotion or a
        rollback (here or in another process) moved it, the new one is opened, its views loaded and its encoder
        warmed, then swapped in: a search holds one generation from start to end, and none waits for a load."""
        root = self.root / coll.name
        path = serving_root(root)
        if path == coll.root:
            return coll
        new = open_collection(path, load_settings(path))
        if self._reader is not None:  # this process serves searches: everything they need is loaded first
            new.refresh(self.fanout)
            if self.on_generation is not None:
                self.on_generation(new)
        with self._lock:
            if self._open.get(coll.name) is not coll:  # deleted, or switched by another thread meanwhile
                return self._open.get(coll.name, new)
            self._open[coll.name] = new
        if hasattr(self.fanout, "forget"):
            self.fanout.forget(coll.shard_refs())  # a search that holds the old views finishes with them
        return new

    def start_reader(self, interval_s: float = REFRESH_S) -> None:
        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.refresh_all()

        self.refresh_all()
        self._reader = threading.Thread(target=loop, name="vela-index-reader", daemon=True)
        self._reader.start()

    def stop_reader(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join(5)

    def names(self) -> list[str]:
        return sorted(
            p.name for p in self.root.iterdir() if NAME_RE.fullmatch(p.name) and (p / SETTINGS_FILE).is_file()
        )

    def resolve(self, name: str) -> str:
        """The collection a name means: the one an alias points at, else the name itself. Every lookup by name
        goes through here; a caller that records a name (a job) records what this returns."""
        return self.aliases.target(name) or name

    def get(self, name: str) -> Collection:
        name = self.resolve(name)
        with self._lock:
            coll = self._get_locked(name)
        if self._reader is not None and coll.behind() and self.refresh_backoff.due(coll.name):
            # Another process published (a job it ran, a merge) and the reader has not loaded it yet: load it
            # now, so that a job reported done is searchable in every process. A stat per request otherwise.
            self.refresh(coll)
        return coll

    def _get_locked(self, name: str) -> Collection:
        if name in self._open:
            if not self._gone(name):
                return self._open[name]
            self._forget(name)
        root = self.root / name
        if not NAME_RE.fullmatch(name) or not (root / SETTINGS_FILE).is_file():
            raise CollectionNotFound(name)
        inode = root.stat().st_ino
        root = serving_root(root)  # the generation that serves (the collection's directory until a reindex)
        coll = self._open[name] = open_collection(root, load_settings(root))
        self._inode[name] = inode
        return coll

    def _gone(self, name: str) -> bool:
        """Whether another process deleted this open collection (and maybe created one of that name again):
        its directory is gone or is another one. One stat, as cheap as the dict lookup beside it."""
        try:
            return (self.root / name).stat().st_ino != self._inode.get(name)
        except FileNotFoundError:
            return True

    def _forget(self, name: str) -> None:
        """Close a collection another process deleted (the caller holds `_lock`)."""
        coll = self._open.pop(name)
        self._inode.pop(name, None)
        self._forget_failures(name)
        if hasattr(self.fanout, "forget"):
            self.fanout.forget(coll.shard_refs())
        coll.close()
        _let_go()

    def _forget_failures(self, name: str) -> None:
        self.refresh_backoff.forget(name)
        self.follow_backoff.forget(name)

    def shards_held(self) -> int:
        """Shards of every collection of the data directory (a collection of one shard counts one)."""
        held = 0
        for name in self.names():
            with contextlib.suppress(OSError, ValueError, KeyError):  # deleted meanwhile, or unreadable: not held
                held += load_settings(self.root / name).shards
        return held

    def check_shard_room(self, name: str, shards: int) -> None:
        """ShardLimitExceeded when a new collection `name` of `shards` shards would pass a cap: its own (a
        collection's shards) or the data directory's (`shard_cap`)."""
        check_new_collection(name, shards)
        check_shard_cap(self.shard_cap, name=name, held=self.shards_held(), adding=shards)

    @contextlib.contextmanager
    def placing(self, name: str, shards: int) -> Iterator[None]:
        """Hold the right to put a new collection `name` of `shards` shards into place (a restore renames its
        folder inside the block): ShardLimitExceeded first when it would pass a cap. No other process creates or
        places a collection meanwhile, so two cannot both pass the cap."""
        with self._creating():
            self.check_shard_room(name, shards)
            yield

    @contextlib.contextmanager
    def _creating(self) -> Iterator[None]:
        """This process's lock and the data directory's: no thread or process creates or places a collection
        meanwhile, so a check of the caps and the rename it allows are one step."""
        with self._lock, file_lock(self.data_dir / CREATE_LOCK):
            yield

    def made_at(self, name: str) -> float | None:
        """When the collection named `name` (not an alias) was made; None when there is none. Another time than
        before: it was deleted and made again meanwhile (a folder's inode can be reused; this time is not)."""
        try:
            return load_settings(self.root / name).created_at
        except (OSError, ValueError, KeyError):
            return None

    def exists(self, name: str) -> bool:
        return self.is_collection(self.resolve(name))

    def is_collection(self, name: str) -> bool:
        """Whether a collection (not an alias) has this name."""
        return NAME_RE.fullmatch(name) is not None and (self.root / name / SETTINGS_FILE).is_file()

    def create(self, settings: CollectionSettings) -> Collection:
        """Create a collection, or return the existing one if its settings agree."""
        validate_name(settings.name)
        if self.aliases.target(settings.name) is not None:
            raise CollectionConflict(f"{settings.name!r} is an alias; a collection needs a name of its own")
        with self._creating():  # two processes creating at the same moment cannot both pass the shard cap
            root = self.root / settings.name
            if (root / SETTINGS_FILE).is_file():
                same_embedder(root, settings)
                return self._get_locked(settings.name)
            self.check_shard_room(settings.name, settings.shards)  # before anything is made: refused, nothing is left
            if root.exists():  # no settings: what a job or merge left of a deleted collection, never a collection
                shutil.rmtree(self._to_trash(root), ignore_errors=True)
            make_in_place(self.root, settings)
            return self._get_locked(settings.name)

    def delete(self, name: str) -> None:
        """Delete a collection (named, or through an alias) and every alias that points at it."""
        coll = self.get(name)
        self.aliases.remove_targeting(coll.name)
        with coll.writer(), self._lock:
            if hasattr(self.fanout, "forget"):
                self.fanout.forget(coll.shard_refs())
            coll.close()
            self._open.pop(coll.name, None)
            self._inode.pop(coll.name, None)
            self._forget_failures(coll.name)
            # Rename first: the collection disappears at once, the files go after (every generation with it).
            root = self.root / coll.name
            (root / SETTINGS_FILE).rename(root / f"{SETTINGS_FILE}.deleted")
            trash = self._to_trash(root)
            # Again, now that the name is no collection's: an alias put while this waited for the writer lock
            # (its check saw the collection still there) goes too, and no later put can point at it.
            self.aliases.remove_targeting(coll.name)
        shutil.rmtree(trash, ignore_errors=True)
        _let_go()

    def remove_leftovers(self) -> list[str]:
        """Remove folders under a collection's name that hold no collection (no settings file): what a merge or a
        job racing a delete left where the collection was. A collection is renamed into place whole, so a folder
        without settings is never one, and `create` would clear it anyway."""
        removed = []
        for entry in self.root.iterdir():
            if NAME_RE.fullmatch(entry.name) and entry.is_dir() and not (entry / SETTINGS_FILE).exists():
                shutil.rmtree(self._to_trash(entry), ignore_errors=True)
                removed.append(entry.name)
        return removed

    def _to_trash(self, root: Path) -> Path:
        """Move a collection's directory out of the way at once (a rename); the caller deletes the files after."""
        trash = self.root.parent / "trash" / f"{root.name}-{uuid.uuid4().hex}"
        trash.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):  # another process moved it first
            root.rename(trash)
        return trash


def _let_go() -> None:
    """After a collection is closed: the doc store's connections that other threads opened are only dropped
    (DocStore.close), and they sit in reference cycles, so until the garbage collector runs the deleted files keep
    their disk space. It runs now, on a thread of its own (off the request that deleted)."""
    threading.Thread(target=gc.collect, name="vela-gc", daemon=True).start()
