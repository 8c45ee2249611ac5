"""A shard's published index brought up to its doc store at start-up (Collection.check_consistency): a catch-up
commit when a crash came between a write and its commit, a rebuild into one segment when there is no manifest (a
new collection, or one written before segments) or a segment file is bad."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol

from indexing.collection_settings import LEGACY_INDEX_DIR
from indexing.docstore import DocStore
from indexing.manifest import ManifestError, current_manifest
from indexing.segment import SegmentError
from indexing.shard_writer import ShardWriter


class Shard(Protocol):
    """What the check needs of a shard (indexing/collection.py `Collection`, which imports this module)."""

    root: Path
    segments_dir: Path
    docstore: DocStore

    def commit(self) -> int: ...

    def index_writer(self) -> ShardWriter: ...


def check_shard(shard: Shard) -> str:
    """ "ok", "committed: ...", "rebuilt: ..." or "stale: ..." (a contextual collection is left to its next job, which
    encodes against its corpus context). The caller holds the collection's writer lock."""
    shard.docstore.purge_replaced()  # what rewrites replaced, kept a few minutes past their publish
    try:
        m = current_manifest(shard.segments_dir)
        if m is None:
            legacy = (shard.root / LEGACY_INDEX_DIR / "CURRENT").exists()
            reason = "no segments" + (" (an index written before segments)" if legacy else "")
        else:
            from indexing.shard_view import ShardView  # faiss: loaded by the first collection that needs it

            ShardView.load(shard.segments_dir, int(m["version"]))  # every file there and whole
            if int(m["seq"]) == shard.docstore.seq() and not shard.docstore.dead_pids().size:
                return "ok"
            if (shard.root / "context").is_dir():
                return "stale: a contextual collection is caught up by its next job"
            shard.commit()
            return f"committed: manifest seq {m['seq']} behind the doc store"
    except (ManifestError, SegmentError, OSError, ValueError, KeyError) as exc:
        reason = str(exc)
    if (shard.root / "context").is_dir() and shard.docstore.counts()[0]:
        return f"stale: {reason} (a contextual collection is rebuilt by its next job)"
    shard.index_writer().commit(shard.docstore, rebuild=True)
    shutil.rmtree(shard.root / LEGACY_INDEX_DIR, ignore_errors=True)
    return f"rebuilt: {reason}"
