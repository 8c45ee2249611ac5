"""A collection the background reader cannot refresh is tried again after a growing delay, and its failure is
logged once (and its recovery once), not on every tick: counted over a fixed number of reader ticks, on a clock
the test moves."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from indexing.collection import CollectionSettings
from indexing.refresh_backoff import FIRST_DELAY_S, MAX_DELAY_S
from indexing.store import REFRESH_S, CollectionStore
from models import EmbedderCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path, tiny_embedder_dir: Path) -> CollectionStore:
    store = CollectionStore(tmp_path)
    dim = EmbedderCache().get(tiny_embedder_dir).dim
    store.create(CollectionSettings(name="c", embedder=str(tiny_embedder_dir), dim=dim))
    return store


def _records(caplog: pytest.LogCaptureFixture, message: str, level: int) -> int:
    return sum(1 for r in caplog.records if r.getMessage() == message and r.levelno == level)


def test_a_failing_collection_is_backed_off_and_logged_once(
    store: CollectionStore, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    store.refresh_backoff.clock = clock
    coll = store.get("c")
    tries = []

    def broken(_fanout: object) -> bool:
        tries.append(clock.now)
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(coll, "refresh", broken)
    caplog.set_level(logging.DEBUG, logger="vela.collections")
    ticks = 1200  # a minute of the reader's ticks
    for _ in range(ticks):
        store.refresh_all()
        clock.now += REFRESH_S
    assert _records(caplog, "collection not refreshed", logging.WARNING) == 1
    # Tried at 0, then after 0.5, 1, 2, 4, 8, 16, 30, 30 s...: a handful of tries, not one per tick.
    assert 5 <= len(tries) <= 12
    gaps = [b - a for a, b in zip(tries, tries[1:], strict=False)]
    assert gaps[0] >= FIRST_DELAY_S and max(gaps) <= MAX_DELAY_S + REFRESH_S
    assert all(later >= earlier for earlier, later in zip(gaps, gaps[1:], strict=False))

    monkeypatch.undo()  # the collection reads again: the next try succeeds and says so, once
    clock.now += MAX_DELAY_S
    for _ in range(10):
        store.refresh_all()
        clock.now += REFRESH_S
    assert _records(caplog, "collection refreshed again", logging.INFO) == 1
    assert store.refresh_backoff.due("c")


def test_a_new_error_is_logged_again(store: CollectionStore, caplog: pytest.LogCaptureFixture) -> None:
    backoff = store.refresh_backoff
    backoff.clock = Clock()
    caplog.set_level(logging.DEBUG, logger="vela.collections")
    backoff.failed("c", "disk full")
    backoff.failed("c", "disk full")
    backoff.failed("c", "manifest unreadable")
    assert _records(caplog, "collection not refreshed", logging.WARNING) == 2
    assert not backoff.due("c")
    store.delete("c")  # a deleted collection's failures are forgotten
    assert backoff.due("c")
