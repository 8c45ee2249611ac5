"""Sharded collections: documents split over N shards by a stable hash of their id.

Layout under `<collection>/`:
    collection.json              the collection's settings, `shards: N`
    shards/s000/ ... s<N-1>/     each shard is a whole collection directory (collection.json, docs.sqlite3,
                                 index/), written and indexed by the same code as an unsharded collection
    index/SHARDS                 {"generation", "versions", "seqs", "bm25"}: the snapshot version of every
                                 shard that searches read together; replaced atomically (temp + os.replace)

A commit has two phases: every shard counts its BM25 statistics (passages, tokens, document frequencies),
the counts are summed, and every shard then builds its snapshot with the sums, so BM25 scores equal the
unsharded collection's (indexing/bm25_global.py). Only then is SHARDS replaced: a search never mixes shards
indexed with different statistics, and a crash before that leaves the previous set in force (each shard
keeps its previous snapshot, see snapshot.KEEP_VERSIONS). `map_shards` runs the per-shard work: in this
process by default, or as Ray tasks (indexing/ray_ingest.py).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from indexing.bm25 import TokenIdCorpus, tokenize
from indexing.bm25_global import CorpusStats
from indexing.collection import SETTINGS_FILE, Collection, CollectionSettings, read_collection
from indexing.docstore import StoredDocument
from indexing.snapshot import SnapshotError, current_version, write_atomic
from models.cde.context import CorpusContext

SHARDS_DIR = "shards"
POINTER = "SHARDS"
T = TypeVar("T")
# Runs fn once per argument tuple, possibly in parallel elsewhere; results in argument order.
ShardMap = Callable[[Callable[..., T], Sequence[tuple[Any, ...]]], list[T]]


def shard_of(doc_id: str, shards: int) -> int:
    """The shard of a document. blake2b, not hash(): Python salts str hashes per process."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "big") % shards


def local_map(fn: Callable[..., T], args: Sequence[tuple[Any, ...]]) -> list[T]:
    return [fn(*a) for a in args]


def shard_stats(root: str) -> CorpusStats:
    """Phase 1 of a commit: the BM25 counts of one shard's doc store (the caller holds the writer lock)."""
    coll = read_collection(Path(root))
    try:
        corpus = TokenIdCorpus()
        for _, texts, _ in coll.docstore.iter_passages():
            corpus.add(tokenize(texts))
        return CorpusStats.of(corpus)
    finally:
        coll.close()


def build_shard(root: str, stats: CorpusStats) -> tuple[int, int]:
    """Phase 2: build and publish one shard's snapshot with the corpus-wide counts; (version, seq)."""
    coll = read_collection(Path(root))
    try:
        seq = coll.docstore.seq()
        return coll.publish_snapshot(bm25_stats=stats), seq
    finally:
        coll.close()


class ShardedCollection(Collection):
    """A collection whose documents live in N shard collections. It has no doc store of its own: ingest
    routes each document to `shard_for(id)`, and search fans out over the shards (service/sharded_search.py).
    """

    def __init__(self, root: Path, settings: CollectionSettings) -> None:  # no super(): no doc store here
        self.root = root
        self.settings = settings
        self.name = settings.name
        self.index_dir = root / "index"
        self._write_lock = threading.RLock()
        self.shards: list[Collection] = []
        for i in range(settings.shards):
            shard_root = root / SHARDS_DIR / f"s{i:03d}"
            if not (shard_root / SETTINGS_FILE).is_file():  # a new collection (built aside, then renamed)
                shard_root.mkdir(parents=True, exist_ok=True)
                shard_settings = replace(settings, name=f"{settings.name}.s{i:03d}", shards=1)
                write_atomic(shard_root / SETTINGS_FILE, json.dumps(shard_settings.to_json(), indent=2).encode())
            self.shards.append(read_collection(shard_root))

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

    def pointer(self) -> dict[str, Any]:
        """The published set: {"generation", "versions", "seqs", "bm25"}; SnapshotError when absent."""
        try:
            return json.loads((self.index_dir / POINTER).read_text())  # type: ignore[no-any-return]
        except FileNotFoundError as exc:
            raise SnapshotError(f"collection {self.name!r} has no published index") from exc
        except ValueError as exc:
            raise SnapshotError(f"unreadable {self.index_dir / POINTER}: {exc}") from exc

    def snapshot(self) -> Any:
        raise SnapshotError(f"collection {self.name!r} is sharded: search it through its shards")

    def commit(self, context: CorpusContext | None = None, map_shards: ShardMap[Any] = local_map) -> int:
        """Two-phase commit over every shard (see the module docstring); returns the new generation."""
        if context is not None:
            raise SnapshotError(f"collection {self.name!r} is sharded: contextual embedders are not supported")
        roots = [(str(s.root),) for s in self.shards]
        stats = CorpusStats.merge(map_shards(shard_stats, roots))
        built = map_shards(build_shard, [(r, stats) for (r,) in roots])
        self.index_dir.mkdir(parents=True, exist_ok=True)
        try:
            generation = int(self.pointer()["generation"]) + 1
        except SnapshotError:
            generation = 1
        record = {
            "generation": generation,
            "versions": [v for v, _ in built],
            "seqs": [q for _, q in built],
            "bm25": stats.summary(),
        }
        write_atomic(self.index_dir / POINTER, json.dumps(record).encode())
        return generation

    def check_consistency(self) -> str:
        """Rebuild every shard when the published set is missing, unreadable or behind a shard's doc store."""
        with self.writer():
            try:
                ptr = self.pointer()
                behind = [
                    i
                    for i, (s, v, q) in enumerate(zip(self.shards, ptr["versions"], ptr["seqs"], strict=True))
                    if q != s.docstore.seq() or (current_version(s.index_dir) or 0) < v
                ]
                if not behind:
                    return "ok"
                reason = f"shards {behind} changed since generation {ptr['generation']}"
            except (SnapshotError, KeyError, ValueError) as exc:
                reason = str(exc)
            self.commit()
            return f"rebuilt: {reason}"

    def stats(self) -> dict[str, Any]:
        ptr = self.pointer()
        per = [s.docstore.counts() for s in self.shards]
        manifests = [
            json.loads((s.index_dir / f"v{v:06d}" / "manifest.json").read_text())
            for s, v in zip(self.shards, ptr["versions"], strict=True)
        ]
        return {
            "name": self.name,
            "documents": sum(d for d, _ in per),
            "passages": sum(p for _, p in per),
            "embedder": self.settings.embedder,
            "dims": {"full": self.settings.dim, "small": min(self.settings.small_dim, self.settings.dim)},
            "index": {
                "version": int(ptr["generation"]),
                "passages": sum(int(m["passages"]) for m in manifests),
                "bytes": sum(int(x) for m in manifests for x in m["files"].values()),
                "bm25": {**self.settings.bm25.to_json(), "global_stats": ptr["bm25"]},
                "dense": {
                    "kind": sorted({m.get("dense_index", {}).get("kind", "flat") for m in manifests}),
                    "settings": self.settings.dense_index.to_json(),
                },
                "shards": [
                    {"documents": d, "passages": p, "version": v}
                    for (d, p), v in zip(per, ptr["versions"], strict=True)
                ],
            },
            "chunking": {"max_tokens": self.settings.chunking.max_tokens, "overlap": self.settings.chunking.overlap},
            "created_at": self.settings.created_at,
            "shards": len(self.shards),
        }

    def close(self) -> None:
        for s in self.shards:
            s.close()
