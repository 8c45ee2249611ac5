"""A merge with commits beside it: deletions committed while the merge builds (more commits than manifests are
kept) neither fail the merge nor come back in the merged segment.

A merge read the picked segments' deletion files one by one, after loading each segment; commits of another
process in between could remove a deletion file the merge's manifest named (manifest.KEEP_MANIFESTS), and the
merge failed with FileNotFoundError. It now reads them with the manifest, under the publish lock."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from indexing import shard_writer
from indexing.collection import Collection, CollectionSettings
from indexing.dense import DenseIndexParams
from indexing.engine import LocalFanout
from indexing.engine import count as engine_count
from indexing.manifest import KEEP_MANIFESTS, current_manifest
from indexing.store import CollectionStore
from tests.indexing.test_segment_equivalence import DIM, MERGE_ALL, SMALL, _doc


def _commit(coll: Collection, *, upsert: Sequence[str] = (), delete: Sequence[str] = ()) -> None:
    with coll.writer():
        if upsert:
            coll.docstore.upsert([_doc(i, 0) for i in upsert])
        if delete:
            coll.docstore.delete(list(delete))
        coll.commit()


def test_deletions_committed_during_a_merge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = CollectionSettings(
        name="c", embedder="none", dim=DIM, small_dim=SMALL, dense_index=DenseIndexParams(kind="flat")
    )
    coll = CollectionStore(tmp_path).create(settings)
    assert isinstance(coll, Collection)
    _commit(coll, upsert=[f"d{i}" for i in range(10)])
    _commit(coll, upsert=[f"d{i}" for i in range(10, 20)])
    _commit(coll, delete=["d0"])  # the first segment now has a deletion file
    late = [f"d{i}" for i in range(1, KEEP_MANIFESTS + 3)]  # one commit each: past what manifests keep
    load = shard_writer.Segment.load
    calls: list[Any] = []

    def load_with_commits_beside(path: Path, *a: Any, **kw: Any) -> Any:
        if not calls:  # the merge has started building: another writer commits meanwhile
            for doc_id in late:
                _commit(coll, delete=[doc_id])
        calls.append(path)
        return load(path, *a, **kw)

    monkeypatch.setattr(shard_writer.Segment, "load", load_with_commits_beside)
    assert coll.merge(MERGE_ALL)
    segments = current_manifest(coll.segments_dir)["segments"]  # type: ignore[index]
    assert len(segments) == 1
    live = 20 - 1 - len(late)
    assert segments[0]["rows"] - segments[0]["dead"] == live  # every deletion, before and during the merge
    assert engine_count(coll, LocalFanout(), None) == live
