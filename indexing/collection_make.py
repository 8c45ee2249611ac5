"""Making a collection's directory: opening one as its settings say (one doc store, or shards), and building a new
one aside and renaming it into place, so that a half-made collection is never seen (CollectionStore.create holds
the data directory's lock around it)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

from indexing.collection import SETTINGS_FILE, Collection, CollectionConflict, CollectionSettings, load_settings
from indexing.shards import ShardedCollection
from velaio.files import write_atomic


def open_collection(root: Path, settings: CollectionSettings) -> Collection:
    """A collection directory as its settings say: one doc store, or shards (each a collection directory)."""
    if settings.shards == 1:
        return Collection(root, settings)
    return ShardedCollection(root, settings)


def same_embedder(root: Path, settings: CollectionSettings) -> None:
    """Creating a collection that exists is fine when it asks for the same embedder."""
    existing = load_settings(root)
    if existing.embedder != settings.embedder:
        raise CollectionConflict(f"collection {settings.name!r} already uses embedder {existing.embedder!r}")


def make_in_place(collections_root: Path, settings: CollectionSettings) -> None:
    """A new, empty collection `settings.name` under `collections_root`, built aside and renamed into place, its
    published index empty and searchable. Made meanwhile by a process that took no lock (an older release): theirs
    stands, as if first, when it asks for the same embedder."""
    root = collections_root / settings.name
    for stale in collections_root.glob(".new-*"):  # left by a process killed while creating (none creates now)
        shutil.rmtree(stale, ignore_errors=True)
    tmp = collections_root / f".new-{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    try:
        coll = open_collection(tmp, settings)
        coll.check_consistency()  # an empty published index: searchable at once
        coll.close()
        write_atomic(tmp / SETTINGS_FILE, json.dumps(settings.to_json(), indent=2).encode())
        tmp.rename(root)
    except BaseException:  # a full disk, say: nothing half made is left
        shutil.rmtree(tmp, ignore_errors=True)
        if not (root / SETTINGS_FILE).is_file():
            raise
        same_embedder(root, settings)
