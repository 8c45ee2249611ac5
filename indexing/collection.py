"""Collections on disk: settings, doc store, writer lock, and the segments of each shard searches read.

An unsharded collection is one shard: its doc store and its `segments/` directory (indexing/manifest.py)
live at the collection root. A sharded one keeps N such shards under `shards/` (indexing/shards.py)."""

from __future__ import annotations

import heapq
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from indexing.collection_settings import (  # noqa: F401  (re-exported: the collection API)
    LEGACY_INDEX_DIR,
    MAX_FIELDS,
    MAX_SHARDS,
    NAME_RE,
    SEGMENTS_DIR,
    SETTINGS_FILE,
    CollectionConflict,
    CollectionNotFound,
    CollectionSettings,
    IndexNotReady,
    check_schema,
    load_settings,
    validate_name,
)
from indexing.collection_stats import collection_stats
from indexing.consistency import check_shard
from indexing.docstore import DocStore, DocumentRecord, PassageHit, StoredDocument
from indexing.docstore_order import Ordering, Position, Row, merged, scan
from indexing.engine import LOCAL_FANOUT, LocalFanout, ShardRef
from indexing.filters import Schema
from indexing.manifest import CURRENT, ManifestError, current_version
from indexing.merge_policy import TieredMergePolicy
from indexing.shard_writer import ShardWriter
from models.cde.context import CorpusContext
from velaio.files import file_lock, write_atomic


class Collection:
    """One shard: a doc store and its segments. Also the shard holder of an unsharded collection."""

    def __init__(self, root: Path, settings: CollectionSettings) -> None:
        self.root = root
        self.settings = settings
        self.name = settings.name
        self.docstore = DocStore(root / "docs.sqlite3")
        self.segments_dir = root / SEGMENTS_DIR
        self._write_lock = threading.RLock()
        self._published: list[int] | None = None  # manifest versions searches read, set by refresh()
        self._published_stamp: tuple[int, int, int] | None = None  # the pointer file those were read from
        self._settings_stamp: tuple[int, int, int] | None = None  # the settings file last read (reload_settings)
        self._settings_lock = threading.Lock()

    @contextmanager
    def writer(self) -> Iterator[None]:
        """One writer per collection: a thread lock in this process and a file lock across processes."""
        with self._write_lock, file_lock(self.root / "write.lock"):
            yield

    @property
    def shard_list(self) -> list[Collection]:
        return [self]

    @property
    def bm25_method(self) -> str:
        return self.settings.bm25.method

    @property
    def bm25_min_token_chars(self) -> int:
        return self.settings.bm25.min_token_chars

    @property
    def bm25_normalize(self) -> str:
        return self.settings.bm25.normalize

    def index_writer(self) -> ShardWriter:
        s = self.settings
        extra = {"bm25": s.bm25.to_json(), "embedder": s.embedder, "schema": s.schema}
        return ShardWriter(self.segments_dir, dim=s.dim, small_dim=s.small_dim, dense=s.dense_index, extra=extra)

    # --- what searches read ------------------------------------------------------------------------
    def shard_refs(self) -> list[ShardRef]:
        key = f"#{self.settings.created_at}"
        return [(str(s.segments_dir), f"{s.segments_dir}{key}") for s in self.shard_list]

    def doc_numbers(self, ids: Sequence[str]) -> list[dict[str, int]]:
        """Per shard, the document number of each of `ids` it holds (a filter's has_id, indexing/engine.py): each id
        is looked up in the one shard that holds it, and a shard none of them belongs to is not asked."""
        wanted: dict[int, list[str]] = {id(s.docstore): [] for s in self.shard_list}
        for store, group in self.by_store(ids):
            wanted[id(store)] = group
        return [
            s.docstore.doc_numbers(wanted[id(s.docstore)]) if wanted[id(s.docstore)] else {} for s in self.shard_list
        ]

    def read_versions(self) -> list[int]:
        """The manifest versions published for searching, read from disk."""
        version = current_version(self.segments_dir)
        if version is None:
            raise IndexNotReady(f"collection {self.name!r} has no published index")
        return [version]

    def published_versions(self) -> list[int]:
        """What searches read: the versions the background reader loaded last (from disk before that)."""
        return self._published if self._published is not None else self.read_versions()

    @property
    def pointer_file(self) -> Path:
        """The file a publish replaces: it names the versions searches read."""
        return self.segments_dir / CURRENT

    def behind(self) -> bool:
        """Whether a publish (here or in another process) replaced the pointer since the last refresh: a stat."""
        return _stamp_or_none(self.pointer_file) != self._published_stamp

    def refresh(self, fanout: Any) -> bool:
        """Load the newest published versions into the fan-out's shard views, then switch searches to them
        (the background reader calls this, and a writer of this process after it publishes)."""
        stamp = _stamp_or_none(self.pointer_file)  # before the read: a publish in between is seen next time
        versions = self.read_versions()
        if versions == self._published:
            self._published_stamp = stamp
            return False
        fanout.call(self.shard_refs(), "preload", [{"version": v} for v in versions])
        self._published, self._published_stamp = versions, stamp
        return True

    def view(self) -> Any:
        """The published ShardView of a one-shard collection, in this process (tools and tests)."""
        return LOCAL_FANOUT.searcher(self.shard_refs()[0]).view(self.read_versions()[0])

    def query_context(self, fanout: Any) -> CorpusContext | None:
        """A CDE collection's corpus context of the published vectors: queries are encoded with it."""
        ref = self.shard_refs()[0]
        searcher = fanout.searcher(ref) if isinstance(fanout, LocalFanout) else LOCAL_FANOUT.searcher(ref)
        return searcher.view(self.published_versions()[0]).context

    def passages(self, wanted: dict[int, int]) -> dict[int, PassageHit]:
        """Hydrate passages {pid: shard} from their shards' doc stores; deleted ones are left out."""
        shards = self.shard_list
        by_shard: dict[int, list[int]] = {}
        for pid, s in wanted.items():
            by_shard.setdefault(s, []).append(pid)
        out: dict[int, PassageHit] = {}
        for s, pids in by_shard.items():
            out.update(shards[s].docstore.passages(pids))
        return out

    # --- the document API: reads of the doc stores, and the writes of its jobs (under the writer lock) --
    def store_of(self, doc_id: str) -> DocStore:
        """The doc store that holds (or would hold) a document."""
        return self.docstore

    def document(self, doc_id: str, *, passages: bool = True) -> DocumentRecord | None:
        return self.store_of(doc_id).document(doc_id, passages=passages)

    def by_store(self, doc_ids: Sequence[str]) -> list[tuple[DocStore, list[str]]]:
        """`doc_ids` grouped by the doc store that holds (or would hold) each."""
        groups: dict[int, tuple[DocStore, list[str]]] = {}
        for doc_id in doc_ids:
            store = self.store_of(doc_id)
            groups.setdefault(id(store), (store, []))[1].append(doc_id)
        return list(groups.values())

    def stored_documents(self, doc_ids: Sequence[str]) -> dict[str, StoredDocument]:
        """The stored documents among `doc_ids` with their passages' spans and vectors, over every shard."""
        out: dict[str, StoredDocument] = {}
        for store, ids in self.by_store(doc_ids):
            out.update(store.stored_documents(ids))
        return out

    def documents(self, doc_ids: Sequence[str]) -> dict[str, DocumentRecord]:
        """The stored documents among `doc_ids` (without passages), from whichever shard holds each."""
        out: dict[str, DocumentRecord] = {}
        for store, ids in self.by_store(doc_ids):
            out.update(store.documents(ids))
        return out

    def scan_metadata(self, after: str | None, page: int) -> Iterator[tuple[str, str]]:
        """(doc_id, metadata JSON) of every document with an id above `after`, in id order: the shards' id-ordered
        streams merged, each read `page` documents at a time (a caller that stops early reads little more)."""
        streams = [_scan(s.docstore, after, page) for s in self.shard_list]
        return streams[0] if len(streams) == 1 else heapq.merge(*streams, key=lambda row: row[0])

    def scan_ordered(self, ordering: Ordering, after: Position | None, page: int) -> Iterator[Row]:
        """(doc_id, metadata JSON, value) of every document past `after` in the ordering (a declared field's, see
        indexing/docstore_order.py): the shards' ordered streams merged, each read `page` documents at a time."""
        streams = [scan(partial(s.docstore.ordered_after, ordering), after, page) for s in self.shard_list]
        return merged(streams, ordering)

    def sync_order_keys(self, fields: dict[str, str] | None = None) -> None:
        """Every shard's doc store keeps the sort keys of `fields` (the declared fields by default), filling in those
        of a field it did not keep: done before a schema that declares the field is published, never on a request."""
        wanted = Schema.from_json(self.settings.schema).fields if fields is None else fields
        for shard in self.shard_list:
            shard.docstore.sync_order_fields(wanted)

    def rewrite_metadata(self, items: Sequence[tuple[str, dict[str, Any], str]]) -> None:
        """New metadata and content hashes, passages re-inserted with their embeddings (DocStore.rewrite_metadata)."""
        self.docstore.rewrite_metadata(items)

    def _settings_holders(self) -> list[Collection]:
        """Every directory with a settings file: the shards first, then the collection."""
        return [s for s in self.shard_list if s is not self] + [self]

    def set_schema(self, schema: dict[str, Any]) -> None:
        """Declare metadata fields (the caller holds the writer lock and has checked the stored values): each
        settings file is replaced atomically, then the settings in memory; the next commit's manifests carry it."""
        check_schema(schema)
        declared = dict(Schema.from_json(schema).fields)
        # A declared field's sort keys exist before any process reads the schema that declares it
        self.sync_order_keys({**Schema.from_json(self.settings.schema).fields, **declared})
        with self._settings_lock:  # the background reader's reload_settings never brings back the old file
            for target in self._settings_holders():
                new = replace(target.settings, schema=schema)
                path = target.root / SETTINGS_FILE
                write_atomic(path, json.dumps(new.to_json(), indent=2).encode())
                target.settings, target._settings_stamp = new, _stamp(path)
        self.sync_order_keys(declared)  # and those of a field no longer declared go once the schema that drops it is

    def set_fusion(self, fusion: dict[str, Any]) -> None:
        """Keep a fusion choice (the caller holds the writer lock), as set_schema keeps a schema."""
        with self._settings_lock:
            for target in self._settings_holders():
                new = replace(target.settings, fusion=fusion)
                path = target.root / SETTINGS_FILE
                write_atomic(path, json.dumps(new.to_json(), indent=2).encode())
                target.settings, target._settings_stamp = new, _stamp(path)

    def reload_settings(self) -> bool:
        """Read the settings files again where another process replaced them (a schema a `vela worker` declared);
        a stat each when nothing changed. True when something was read."""
        changed = False
        with self._settings_lock:
            for target in self._settings_holders():
                try:
                    stamp = _stamp(target.root / SETTINGS_FILE)
                    if stamp != target._settings_stamp:
                        target.settings, target._settings_stamp = load_settings(target.root), stamp
                        changed = True
                except (OSError, ValueError, KeyError):
                    continue  # deleted meanwhile, or unreadable: the next call reads it again
        return changed

    # --- writing ------------------------------------------------------------------------------------
    def commit(self, context: CorpusContext | None = None, *, rebuild: bool = False) -> int:
        """Publish what changed in the doc store as a new segment (the caller holds the writer lock).

        A CDE collection passes the corpus context all its vectors were made with (indexing/context.py)."""
        if context is None and (self.root / "context").is_dir() and self.docstore.counts()[0]:
            raise ManifestError(f"collection {self.name!r} is contextual: commit through commit_collection")
        return self.index_writer().commit(self.docstore, context, rebuild=rebuild)

    def merge(self, policy: TieredMergePolicy | None = None) -> int:
        """Run the merge policy to its end on every shard; returns how many merges ran."""
        done = 0
        for shard in self.shard_list:
            while shard.index_writer().merge(policy):
                done += 1
        return done

    def check_consistency(self) -> str:
        """Bring the published index up to the doc store: a catch-up commit when a crash came between a
        write and its commit, a rebuild into one segment when there is no manifest (a new collection, or one
        written before segments) or a segment file is bad. Returns "ok", "committed: ..." or "rebuilt: ..."."""
        with self.writer():
            self.sync_order_keys()  # a store written before ordered scrolls, or a schema job a crash cut short
            reasons = []
            for shard in self.shard_list:
                reasons.append(check_shard(shard))
            self._publish_set()
            bad = [r for r in reasons if r != "ok"]
            return bad[0] if bad else "ok"

    def _publish_set(self) -> int:
        """A sharded collection records which shard manifests are searched together (indexing/shards.py)."""
        return 0

    def stats(self) -> dict[str, Any]:
        """Counts and index facts. Read from disk: a writer may replace what was listed meanwhile (its files
        go with the manifest before last), and then the facts are read again."""
        for attempt in range(3):
            try:
                return collection_stats(self)
            except (ManifestError, OSError):
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def published_set_generation(self) -> int:
        """The generation of the shard set searches read (a sharded collection's; one shard has none: 0)."""
        return 0

    def close(self) -> None:
        self.docstore.close()


def _stamp(path: Path) -> tuple[int, int, int]:
    """Which version of a file this is: replaced atomically, a new file has a new inode."""
    st = path.stat()
    return st.st_ino, st.st_mtime_ns, st.st_size


def _stamp_or_none(path: Path) -> tuple[int, int, int] | None:
    try:
        return _stamp(path)
    except FileNotFoundError:
        return None


def _scan(store: DocStore, after: str | None, page: int) -> Iterator[tuple[str, str]]:
    while True:
        rows = store.metadata_after(after, page)
        yield from rows
        if len(rows) < page:
            return
        after = rows[-1][0]
