"""Deleting a collection takes every alias of it along, including one put while the delete waited for the
collection's writer lock (a job was writing): no alias is left pointing at nothing, and none can be put after."""

from __future__ import annotations

import threading
import time

import pytest

from indexing.aliases import NotACollection
from indexing.collection import CollectionSettings
from indexing.store import CollectionStore


def test_an_alias_put_while_the_delete_waits_goes_with_the_collection(
    store: CollectionStore, settings: CollectionSettings
) -> None:
    coll = store.create(settings)
    store.aliases.put("early", coll.name, is_collection=store.is_collection)
    with coll.writer():  # a job is writing: the delete waits for it
        deleting = threading.Thread(target=store.delete, args=(coll.name,))
        deleting.start()
        deadline = time.monotonic() + 30  # a guard against a hang, not a timed assertion
        while store.aliases.target("early") is not None:  # the delete has begun: its first pass took this one
            assert time.monotonic() < deadline
            time.sleep(0.01)
        store.aliases.put("late", coll.name, is_collection=store.is_collection)  # still a collection: accepted
    deleting.join(30)
    assert not deleting.is_alive() and not store.is_collection(coll.name)
    assert store.aliases.target("late") is None and store.aliases.all() == {}
    with pytest.raises(NotACollection):
        store.aliases.put("later", coll.name, is_collection=store.is_collection)
