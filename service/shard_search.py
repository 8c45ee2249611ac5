"""One shard's side of a sharded search: rank its own passages, and hydrate hits from its own doc store.

A `ShardSearcher` holds one shard directory. It runs in this process (`LocalFanout`) or as a Ray actor
(service/ray_shards.py), with the same code either way; what crosses between processes is plain data
(numpy arrays, tuples, `PassageHit`s).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexing.bm25 import warm_up as warm_up_bm25
from indexing.collection import read_collection
from indexing.docstore import PassageHit
from indexing.snapshot import IndexSnapshot, load_snapshot
from service.search import Dim, Mode, Ranked, _fast_passage_docs, rank_runs

KEEP_SNAPSHOTS = 2  # the published set and the one before it, while searches on it finish


@dataclass(frozen=True)
class ShardRanking:
    """Per query: each run's top units of this shard (unit key, score, passage id), best first; and the
    passages of the first `hydrate` units of every run, so most searches need no second round."""

    runs: list[dict[str, Ranked]]
    passages: dict[int, PassageHit]


class ShardSearcher:
    def __init__(self, root: str) -> None:
        warm_up_bm25()  # a new Ray actor compiles the numba kernels now, not on its first query
        self.coll = read_collection(Path(root))
        self._snaps: dict[int, IndexSnapshot] = {}
        self._lock = threading.Lock()

    def _snapshot(self, version: int) -> IndexSnapshot:
        """The shard snapshot a published set names (not the shard's own CURRENT: the set is what is
        consistent across shards)."""
        with self._lock:
            snap = self._snaps.get(version)
            if snap is None:
                snap = self._snaps[version] = load_snapshot(self.coll.index_dir, version)
                for old in sorted(self._snaps)[:-KEEP_SNAPSHOTS]:
                    del self._snaps[old]
            return snap

    def rank(
        self,
        *,
        version: int,
        queries: Sequence[str],
        qv: np.ndarray | None,
        mode: Mode,
        n: int,
        dim: Dim,
        rescore: bool,
        group_by_doc: bool,
        hydrate: int,
    ) -> ShardRanking:
        snap = self._snapshot(version)
        store = self.coll.docstore

        def ranked(exact: bool) -> tuple[list[dict[str, Ranked]], list[int]]:
            passage_docs: Any = (
                (lambda pids: store.passage_docs(pids.tolist())) if exact else _fast_passage_docs(self.coll, snap)
            )
            runs = rank_runs(
                snap=snap,
                passage_docs=passage_docs,
                qv=qv,
                queries=queries,
                mode=mode,
                n=n,
                dim=dim,
                rescore=rescore,
                group_by_doc=group_by_doc,
            )
            per_query = [{name: r[qi] for name, r in runs.items()} for qi in range(len(queries))]
            pids = sorted({pid for q in per_query for r in q.values() for _, _, pid in r[:hydrate]})
            return per_query, pids

        # As in search_batch: the in-memory passage table first; a document deleted since the snapshot was
        # published shows up as a passage missing at hydration, and then every passage is checked.
        per_query, pids = ranked(exact=False)
        passages = store.passages(pids)
        if len(passages) < len(pids):
            per_query, pids = ranked(exact=True)
            passages = store.passages(pids)
        return ShardRanking(runs=per_query, passages=passages)

    def hydrate(self, pids: Sequence[int]) -> dict[int, PassageHit]:
        return self.coll.docstore.passages(list(pids))

    def close(self) -> None:
        self.coll.close()


ShardRef = tuple[str, str]  # (shard directory, a key naming this incarnation of it: root + created_at)


class LocalFanout:
    """Every shard searched in this process, one after another (no Ray: VELA_RAY_ADDRESS unset)."""

    def __init__(self) -> None:
        self._searchers: dict[str, ShardSearcher] = {}
        self._lock = threading.Lock()

    def _searcher(self, ref: ShardRef) -> ShardSearcher:
        root, key = ref
        with self._lock:
            if key not in self._searchers:
                self._searchers[key] = ShardSearcher(root)
            return self._searchers[key]

    def rank(self, *, shards: Sequence[ShardRef], versions: Sequence[int], **request: Any) -> list[ShardRanking]:
        return [self._searcher(ref).rank(version=v, **request) for ref, v in zip(shards, versions, strict=True)]

    def hydrate(self, *, shards: Sequence[ShardRef], wanted: Sequence[Sequence[int]]) -> list[dict[int, PassageHit]]:
        return [self._searcher(ref).hydrate(p) if p else {} for ref, p in zip(shards, wanted, strict=True)]
