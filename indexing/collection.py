"""Collections on disk: their settings, doc store, writer lock and the index snapshot searches read."""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from indexing.bm25 import BM25Params
from indexing.bm25_global import CorpusStats
from indexing.chunking import ChunkingParams
from indexing.dense import DenseIndexParams
from indexing.docstore import DocStore
from indexing.snapshot import (
    IndexSnapshot,
    SnapshotError,
    build_snapshot,
    current_version,
    load_snapshot,
    write_atomic,
)
from models.cde.context import CorpusContext

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SETTINGS_FILE = "collection.json"
MAX_SHARDS = 256  # a shard per actor: beyond this the fan-out, not the index, is what costs


class CollectionNotFound(KeyError):
    pass


class CollectionConflict(ValueError):
    pass


@dataclass(frozen=True)
class CollectionSettings:
    name: str
    embedder: str  # resolved model directory
    dim: int
    small_dim: int = 256
    chunking: ChunkingParams = field(default_factory=ChunkingParams)
    bm25: BM25Params = field(default_factory=BM25Params)
    created_at: float = field(default_factory=time.time)
    dense_index: DenseIndexParams = field(default_factory=DenseIndexParams)
    shards: int = 1  # > 1: documents split by a hash of their id over shard directories (indexing/shards.py)

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= MAX_SHARDS:
            raise ValueError(f"shards must be between 1 and {MAX_SHARDS}, got {self.shards}")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["bm25"] = self.bm25.to_json()
        d["dense_index"] = self.dense_index.to_json()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CollectionSettings:
        return cls(
            name=d["name"],
            embedder=d["embedder"],
            dim=int(d["dim"]),
            small_dim=int(d["small_dim"]),
            chunking=ChunkingParams(**d["chunking"]),
            bm25=BM25Params.from_json(d["bm25"]),
            created_at=float(d["created_at"]),
            dense_index=DenseIndexParams.from_json(d.get("dense_index")),  # absent from older files
            shards=int(d.get("shards", 1)),
        )


def validate_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ValueError(
            "collection name must be 1-64 characters of letters, digits, '_', '-' or '.', "
            "starting with a letter or digit"
        )
    return name


class Collection:
    def __init__(self, root: Path, settings: CollectionSettings) -> None:
        self.root = root
        self.settings = settings
        self.name = settings.name
        self.docstore = DocStore(root / "docs.sqlite3")
        self.index_dir = root / "index"
        self._snapshot: IndexSnapshot | None = None
        self._load_lock = threading.Lock()
        self._write_lock = threading.RLock()

    @contextmanager
    def writer(self) -> Iterator[None]:
        """One writer per collection: a thread lock in this process and a file lock across processes."""
        with self._write_lock, open(self.root / "write.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def snapshot(self) -> IndexSnapshot:
        """The last committed snapshot; reloaded when another writer (or process) published a newer one."""
        version = current_version(self.index_dir)
        snap = self._snapshot
        if snap is not None and snap.version == version:
            return snap
        with self._load_lock:
            if self._snapshot is None or self._snapshot.version != version:
                if version is None:
                    raise SnapshotError(f"collection {self.name!r} has no published index")
                self._snapshot = load_snapshot(self.index_dir, version)
            return self._snapshot

    def commit(self, context: CorpusContext | None = None) -> int:
        """Rebuild the indexes from the doc store and publish them (caller may hold the writer lock).

        A CDE collection passes the corpus context all its vectors were made with (indexing/context.py)."""
        if context is None and (self.root / "context").is_dir() and self.docstore.counts()[0]:
            raise SnapshotError(f"collection {self.name!r} is contextual: commit through commit_collection")
        return self.publish_snapshot(context=context)

    def publish_snapshot(self, *, context: CorpusContext | None = None, bm25_stats: CorpusStats | None = None) -> int:
        """Build and publish the next snapshot of this directory; a shard of a sharded collection passes the
        corpus-wide BM25 counts (indexing/shards.py). Returns the version."""
        s = self.settings
        version = build_snapshot(
            self.index_dir,
            self.docstore,
            dim=s.dim,
            small_dim=s.small_dim,
            bm25_params=s.bm25,
            extra={"embedder": s.embedder},
            dense=s.dense_index,
            context=context,
            bm25_stats=bm25_stats,
        )
        return version

    def check_consistency(self) -> str:
        """Compare the published snapshot with the doc store; rebuild when they disagree or a file is bad.

        Returns "ok", "rebuilt: <reason>".
        """
        with self.writer():
            try:
                version = current_version(self.index_dir)
                if version is None:
                    reason = "no snapshot"
                else:
                    snap = load_snapshot(self.index_dir, version)
                    if snap.seq == self.docstore.seq():
                        self._snapshot = snap
                        return "ok"
                    reason = f"snapshot seq {snap.seq} != doc store seq {self.docstore.seq()}"
            except SnapshotError as exc:
                reason = str(exc)
            if (self.root / "context").is_dir():
                # CDE: vectors must be brought to the current context first, which needs the model: the
                # next job's commit (commit_collection) rebuilds. Searches keep the snapshot they have.
                return f"stale: {reason} (a contextual collection is rebuilt by its next job)"
            self.commit()
            self._snapshot = None
            return f"rebuilt: {reason}"

    def stats(self) -> dict[str, Any]:
        docs, passages = self.docstore.counts()
        snap = self.snapshot()
        return {
            "name": self.name,
            "documents": docs,
            "passages": passages,
            "embedder": self.settings.embedder,
            "dims": {"full": self.settings.dim, "small": min(self.settings.small_dim, self.settings.dim)},
            "index": {
                "version": snap.version,
                "passages": snap.passages,
                "bytes": sum(int(v) for v in snap.manifest["files"].values()),
                "bm25": snap.manifest["bm25"],
                # What was built ("flat" or "hnsw") and the settings that chose it ("auto" and a threshold).
                "dense": {"kind": snap.dense_kind, "settings": self.settings.dense_index.to_json()},
            },
            "chunking": asdict(self.settings.chunking),
            "created_at": self.settings.created_at,
        }

    def close(self) -> None:
        self.docstore.close()


def open_collection(root: Path, settings: CollectionSettings) -> Collection:
    """A collection directory as its settings say: one doc store, or shards (each a collection directory)."""
    if settings.shards == 1:
        return Collection(root, settings)
    from indexing.shards import ShardedCollection  # it builds on this module

    return ShardedCollection(root, settings)


def read_collection(root: Path) -> Collection:
    """Open the collection directory at `root` on its own (a shard, from a process that holds no store)."""
    return open_collection(root, CollectionSettings.from_json(json.loads((root / SETTINGS_FILE).read_text())))


class CollectionStore:
    """All collections under `<data_dir>/collections/`, opened once and shared."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "collections"
        self.root.mkdir(parents=True, exist_ok=True)
        self._open: dict[str, Collection] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if NAME_RE.match(p.name) and (p / SETTINGS_FILE).is_file())

    def get(self, name: str) -> Collection:
        with self._lock:
            return self._get_locked(name)

    def _get_locked(self, name: str) -> Collection:
        if name in self._open:
            return self._open[name]
        root = self.root / name
        if not NAME_RE.match(name) or not (root / SETTINGS_FILE).is_file():
            raise CollectionNotFound(name)
        settings = CollectionSettings.from_json(json.loads((root / SETTINGS_FILE).read_text()))
        coll = self._open[name] = open_collection(root, settings)
        return coll

    def exists(self, name: str) -> bool:
        return NAME_RE.match(name) is not None and (self.root / name / SETTINGS_FILE).is_file()

    def create(self, settings: CollectionSettings) -> Collection:
        """Create a collection, or return the existing one if its settings agree."""
        validate_name(settings.name)
        with self._lock:
            root = self.root / settings.name
            if (root / SETTINGS_FILE).is_file():
                existing = CollectionSettings.from_json(json.loads((root / SETTINGS_FILE).read_text()))
                if existing.embedder != settings.embedder:
                    raise CollectionConflict(
                        f"collection {settings.name!r} already uses embedder {existing.embedder!r}"
                    )
                return self._get_locked(settings.name)
            # Build it aside and rename it into place, so a half-created collection is never seen.
            tmp = self.root / f".new-{uuid.uuid4().hex}"
            tmp.mkdir(parents=True)
            coll = open_collection(tmp, settings)
            coll.commit()
            coll.close()
            write_atomic(tmp / SETTINGS_FILE, json.dumps(settings.to_json(), indent=2).encode())
            tmp.rename(root)
            return self._get_locked(settings.name)

    def delete(self, name: str) -> None:
        coll = self.get(name)
        with coll.writer(), self._lock:
            coll.close()
            self._open.pop(name, None)
            # Rename first: the collection disappears at once, the files go after.
            trash = self.root.parent / "trash" / f"{name}-{uuid.uuid4().hex}"
            trash.parent.mkdir(parents=True, exist_ok=True)
            (coll.root / SETTINGS_FILE).rename(coll.root / f"{SETTINGS_FILE}.deleted")
            coll.root.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)
