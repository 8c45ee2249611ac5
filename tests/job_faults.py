"""Faults injected into the jobs of an in-process server, by collection name, for tests of job states through the
API, the Python client and the CLI: import the fixtures into a test module (`from tests.job_faults import gate`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import indexing.ingest as ingest


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Jobs of `gated*` collections wait in their commit until the event is set (set at the end in any case)."""
    real, release = ingest.commit_collection, threading.Event()

    def held(coll: Any, embedder: Any) -> int:
        if coll.name.startswith("gated"):
            release.wait(120)
        return real(coll, embedder)

    monkeypatch.setattr(ingest, "commit_collection", held)
    try:
        yield release
    finally:
        release.set()


@pytest.fixture
def fail_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first commit of each `flaky*` collection fails like a full disk."""
    real = ingest.commit_collection
    failed: set[str] = set()

    def flaky(coll: Any, embedder: Any) -> int:
        if coll.name.startswith("flaky") and coll.name not in failed:
            failed.add(coll.name)
            raise OSError(28, "No space left on device (injected)")
        return real(coll, embedder)

    monkeypatch.setattr(ingest, "commit_collection", flaky)
