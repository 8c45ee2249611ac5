"""Creating collections from several processes at once: the shard cap holds across them, and what a process killed
while creating left behind is cleared by the next create."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from pathlib import Path

import pytest

from indexing.collection import CollectionSettings
from indexing.shard_budget import ShardCap, ShardLimitExceeded
from indexing.store import CollectionStore


def test_two_processes_creating_at_once_cannot_both_pass_the_shard_cap(
    tmp_path: Path, settings: CollectionSettings
) -> None:
    # Two stores on one data directory: what two processes hold (each its own thread lock).
    first, second = CollectionStore(tmp_path), CollectionStore(tmp_path)
    for store in (first, second):
        store.shard_cap = ShardCap(3, "test")
    # The first is held inside its check, after counting the shards held and before its collection exists.
    inside, release = threading.Event(), threading.Event()
    count = first.shards_held

    def counted_then_held() -> int:
        held = count()
        inside.set()
        release.wait(10)
        return held

    first.shards_held = counted_then_held  # type: ignore[method-assign]
    outcome: dict[str, str] = {}

    def create(store: CollectionStore, name: str) -> None:
        try:
            store.create(dataclasses.replace(settings, name=name, shards=2))
            outcome[name] = "made"
        except ShardLimitExceeded:
            outcome[name] = "refused"

    a = threading.Thread(target=create, args=(first, "a"))
    a.start()
    assert inside.wait(10)
    b = threading.Thread(target=create, args=(second, "b"))
    b.start()
    time.sleep(0.3)  # without a lock across processes, the second would count 0 shards held and create now
    assert "b" not in outcome
    release.set()
    a.join(10)
    b.join(10)
    assert outcome == {"a": "made", "b": "refused"}
    assert second.names() == ["a"] and second.shards_held() == 2


def test_a_half_made_collection_of_a_killed_process_is_cleared_by_the_next_create(
    tmp_path: Path, settings: CollectionSettings
) -> None:
    store = CollectionStore(tmp_path)
    left = store.root / ".new-0123abcd"  # where a create builds a collection before renaming it into place
    (left / "shard").mkdir(parents=True)
    store.create(settings)
    assert not left.exists()
    assert store.names() == ["c1"]


@pytest.mark.parametrize("shards", [1, 3])
def test_the_lock_file_is_no_collection(tmp_path: Path, settings: CollectionSettings, shards: int) -> None:
    store = CollectionStore(tmp_path)
    store.create(dataclasses.replace(settings, shards=shards))
    assert store.names() == ["c1"] and store.shards_held() == shards


def test_folders_that_hold_no_collection_are_removed_and_collections_stay(
    tmp_path: Path, settings: CollectionSettings
) -> None:
    store = CollectionStore(tmp_path)
    store.create(settings)
    (store.root / "race-5" / "segments").mkdir(parents=True)  # what a merge racing a delete left
    (store.root / "race-5" / "segments" / "publish.lock").touch()
    assert store.remove_leftovers() == ["race-5"]
    assert sorted(p.name for p in store.root.iterdir()) == ["c1"]
    assert store.names() == ["c1"]


def test_a_deleted_collections_doc_store_files_are_let_go_by_every_thread(
    tmp_path: Path, settings: CollectionSettings
) -> None:
    """Connections other threads opened to the doc store sit in reference cycles once dropped: the delete has the
    garbage collector run, so that the deleted files give their disk space back without waiting for it."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    store = CollectionStore(tmp_path)
    coll = store.create(settings)
    with ThreadPoolExecutor(4) as pool:  # each thread opens a connection of its own, as request threads do
        list(pool.map(lambda _: coll.docstore.counts(), range(40)))

    def held() -> int:
        """Files of this test's doc stores the process holds open."""
        targets = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # an fd closed while listed
                targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        return sum("docs.sqlite3" in t and str(tmp_path) in t for t in targets)

    assert held() > 0
    store.delete("c1")
    for _ in range(200):  # the collection runs on a background thread
        if held() == 0:
            break
        time.sleep(0.05)
    assert held() == 0
