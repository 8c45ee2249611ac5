"""Sharded collections: documents split over N shards by a stable hash of their id.

Layout under `<collection>/`:
    collection.json              the collection's settings, `shards: N`
    shards/s000/ ... s<N-1>/     each shard is a whole collection directory (collection.json, docs.sqlite3,
                                 segments/), written and indexed by the same code as an unsharded collection
    segments/SHARDS              {"generation", "versions"}: the manifest version of every shard that searches
                                 read together; replaced atomically (temp + os.replace)

A commit publishes a new manifest in every shard that changed, then replaces SHARDS: a search never mixes
shard states of two commits, and a crash before that leaves the previous set in force (each shard keeps
its previous manifest, see manifest.KEEP_MANIFESTS). BM25 needs no shared statistics at commit time:
a search sums the shards' counts first (indexing/engine.py).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from indexing.collection import (
    LEGACY_INDEX_DIR,
    SEGMENTS_DIR,
    SETTINGS_FILE,
    Collection,
    CollectionSettings,
    IndexNotReady,
    load_settings,
)
from indexing.docstore import DocStore, StoredDocument
from indexing.manifest import ManifestError, current_version
from indexing.merge_policy import TieredMergePolicy
from models.cde.context import CorpusContext
from velaio.files import file_lock, write_atomic

SHARDS_DIR = "shards"
POINTER = "SHARDS"


def shard_of(doc_id: str, shards: int) -> int:
    """The shard of a document. blake2b, not hash(): Python salts str hashes per process."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "big") % shards


class ShardedCollection(Collection):
    """A collection whose documents live in N shard collections. It has no doc store of its own: ingest
    routes each document to `shard_for(id)`, and search fans out over the shards (service/sharded_search.py).
    """

    def __init__(self, root: Path, settings: CollectionSettings) -> None:  # no super(): no doc store here
        self.root = root
        self.settings = settings
        self.name = settings.name
        self.segments_dir = root / SEGMENTS_DIR
        self._write_lock = threading.RLock()
        self._published: list[int] | None = None
        self._published_stamp: tuple[int, int, int] | None = None
        self._settings_stamp: tuple[int, int, int] | None = None
        self._settings_lock = threading.Lock()
        self._set_lock = threading.Lock()
        self.shards: list[Collection] = []
        for i in range(settings.shards):
            shard_root = root / SHARDS_DIR / f"s{i:03d}"
            if not (shard_root / SETTINGS_FILE).is_file():  # a new collection (built aside, then renamed)
                shard_root.mkdir(parents=True, exist_ok=True)
                shard_settings = replace(settings, name=f"{settings.name}.s{i:03d}", shards=1)
                write_atomic(shard_root / SETTINGS_FILE, json.dumps(shard_settings.to_json(), indent=2).encode())
            self.shards.append(Collection(shard_root, load_settings(shard_root)))

    def shard_for(self, doc_id: str) -> Collection:
        return self.shards[shard_of(doc_id, len(self.shards))]

    def split(self, doc_ids: Sequence[str]) -> list[list[int]]:
        """Positions of `doc_ids` per shard, in input order."""
        out: list[list[int]] = [[] for _ in self.shards]
        for pos, doc_id in enumerate(doc_ids):
            out[shard_of(doc_id, len(self.shards))].append(pos)
        return out

    def number(self, docs: Sequence[StoredDocument]) -> list[StoredDocument]:
        """Give the documents' passages the ids one doc store would (the caller holds the writer lock):
        ids stay unique across shards, and equal to an unsharded collection's after the same writes, so
        hits and the tie order between equal scores (service/search.py) do not depend on the sharding."""
        pid = max(s.docstore.next_pid() for s in self.shards)
        out = []
        for d in docs:
            out.append(replace(d, first_pid=pid))
            pid += len(d.spans)
        return out

    def upsert(self, docs: Sequence[StoredDocument]) -> None:
        """Number the documents' passages, then store each in its shard (one transaction per shard)."""
        numbered = self.number(docs)
        for shard, positions in zip(self.shards, self.split([d.doc_id for d in numbered]), strict=True):
            if positions:
                shard.docstore.upsert([numbered[i] for i in positions])

    def store_of(self, doc_id: str) -> DocStore:
        return self.shard_for(doc_id).docstore

    def rewrite_metadata(self, items: Sequence[tuple[str, dict[str, Any], str]]) -> None:
        """Each shard's documents re-inserted with passage ids numbered across the shards, as `number` does."""
        pid = max(s.docstore.next_pid() for s in self.shards)
        for shard, positions in zip(self.shards, self.split([item[0] for item in items]), strict=True):
            if positions:
                pid = shard.docstore.rewrite_metadata([items[i] for i in positions], first_pid=pid)

    @property
    def shard_list(self) -> list[Collection]:
        return self.shards

    def pointer(self) -> dict[str, Any]:
        """The published set: {"generation", "versions"}; IndexNotReady when absent."""
        try:
            return json.loads((self.segments_dir / POINTER).read_text())  # type: ignore[no-any-return]
        except FileNotFoundError as exc:
            raise IndexNotReady(f"collection {self.name!r} has no published index") from exc
        except ValueError as exc:
            raise ManifestError(f"unreadable {self.segments_dir / POINTER}: {exc}") from exc

    def read_versions(self) -> list[int]:
        return [int(v) for v in self.pointer()["versions"]]

    @property
    def pointer_file(self) -> Path:
        return self.segments_dir / POINTER

    def published_set_generation(self) -> int:
        return int(self.pointer()["generation"])

    def query_context(self, fanout: Any) -> CorpusContext | None:
        return None  # contextual embedders are refused for sharded collections

    def commit(self, context: CorpusContext | None = None, *, rebuild: bool = False) -> int:
        """Commit every shard, then publish the set; returns the new generation."""
        if context is not None:
            raise ManifestError(f"collection {self.name!r} is sharded: contextual embedders are not supported")
        for shard in self.shards:
            shard.index_writer().commit(shard.docstore, rebuild=rebuild)
        return self._publish_set()

    def _publish_set(self) -> int:
        """Name every shard's current manifest in SHARDS. Commits and background merges both publish here:
        one at a time, and each reads the shards' versions inside the lock, so the last one names the newest."""
        self.segments_dir.mkdir(parents=True, exist_ok=True)
        with self._set_lock, file_lock(self.segments_dir / "set.lock"):
            versions = [current_version(s.segments_dir) for s in self.shards]
            try:
                ptr = self.pointer()
                if ptr["versions"] == versions:
                    return int(ptr["generation"])
                generation = int(ptr["generation"]) + 1
            except (IndexNotReady, ManifestError, KeyError):
                generation = 1
            record = {"generation": generation, "versions": versions}
            write_atomic(self.segments_dir / POINTER, json.dumps(record).encode())
            return generation

    def merge(self, policy: TieredMergePolicy | None = None) -> int:
        """Merge each shard as its policy says, publishing the set after every merge: the set then never
        names a manifest that its shard has already removed (manifest.KEEP_MANIFESTS)."""
        done = 0
        for shard in self.shards:
            while shard.index_writer().merge(policy):
                done += 1
                self._publish_set()
        return done

    def check_consistency(self) -> str:
        outcome = super().check_consistency()
        shutil.rmtree(self.root / LEGACY_INDEX_DIR, ignore_errors=True)  # the set of whole-shard snapshots
        return outcome

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["index"]["shards"] = [
            {"documents": d, "passages": p, "version": v}
            for (d, p), v in zip((s.docstore.counts() for s in self.shards), self.published_versions(), strict=True)
        ]
        out["shards"] = len(self.shards)
        return out

    def close(self) -> None:
        for s in self.shards:
            s.close()
