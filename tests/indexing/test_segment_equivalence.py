"""Property: after any sequence of upserts, deletes, commits and merges, on 1 or 3 shards, every mode's
top-k equals a from-scratch single-segment index of the same live passages (ids, order, scores to 1e-6)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.bm25 import BM25Params, tokenize
from indexing.collection import Collection, CollectionSettings
from indexing.dense import DenseIndexParams
from indexing.docstore import StoredDocument
from indexing.engine import LocalFanout, ShardRef
from indexing.engine import search as engine_search
from indexing.manifest import publish
from indexing.merge_policy import TieredMergePolicy
from indexing.ranking import RankRequest
from indexing.segment import SegmentBuilder
from indexing.shards import ShardedCollection
from indexing.store import CollectionStore

DIM, SMALL = 16, 8
WORDS = ["tide", "moon", "gravity", "sugar", "insulin", "magma", "crust", "carbon"]
IDS = [f"d{i}" for i in range(10)]
QUERIES = ["moon tide", "sugar", "magma crust carbon", "gravity moon moon"]
MERGE_ALL = TieredMergePolicy(merge_factor=2, floor_rows=1, max_segments=1, reclaim_deletes=0.0)


def _vector(key: str) -> np.ndarray:
    rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big"))
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)  # type: ignore[no-any-return]


def _doc(doc_id: str, variant: int) -> StoredDocument:
    rng = np.random.default_rng(variant * 100 + int(doc_id[1:]))
    text = " ".join(rng.choice(WORDS, size=int(rng.integers(2, 9))))
    cut = len(text) // 2 if variant % 2 else len(text)
    spans = [(0, cut), (cut, len(text))] if cut < len(text) else [(0, len(text))]
    emb = np.stack([_vector(f"{doc_id}/{variant}/{i}") for i in range(len(spans))])
    return StoredDocument(doc_id, "", text, {}, f"{doc_id}{variant}", spans, emb)


@dataclass
class Reference:
    """One segment over every live passage of `coll`, built from scratch."""

    dir: Path
    method: str

    def shard_refs(self) -> list[ShardRef]:
        return [(str(self.dir), f"{self.dir}#{self.dir.stat().st_mtime_ns}")]

    def read_versions(self) -> list[int]:
        return self.published_versions()

    def published_versions(self) -> list[int]:
        return [int(json.loads((self.dir / "CURRENT").read_text())["version"])]

    @property
    def bm25_method(self) -> str:
        return self.method

    @property
    def bm25_min_token_chars(self) -> int:
        return 2

    @property
    def bm25_normalize(self) -> str:
        return "none"


def _reference(coll: Collection, where: Path, params: BM25Params) -> Reference:
    rows: list[tuple[int, int, str, np.ndarray]] = []
    for s, shard in enumerate(coll.shard_list):
        for pids, docs, texts, vecs in shard.docstore.iter_passages_after(-1):
            rows += [(p, s * 1_000_000 + d, t, v) for p, d, t, v in zip(pids, docs, texts, vecs, strict=True)]
    rows.sort(key=lambda r: r[0])
    b = SegmentBuilder(rows=len(rows), dim=DIM, small_dim=SMALL, dense=DenseIndexParams(kind="flat"))
    if rows:
        b.add(
            np.array([r[0] for r in rows]),
            np.array([r[1] for r in rows]),
            np.stack([r[3] for r in rows]),
            tokenize([r[2] for r in rows]),
            ["{}"] * len(rows),
        )
    where.mkdir(parents=True)
    name = b.finish(where)
    entry = {"name": name, "rows": len(rows), "dead": 0, "deletes": None, "max_pid": 0}
    publish(where, {"segments": [entry], "bm25": params.to_json(), "small_dim": SMALL, "context": None})
    return Reference(where, params.method)


def _top(coll: Any, fanout: LocalFanout, req: RankRequest) -> list[list[tuple[int, float]]]:
    qv = np.stack([_vector(q) for q in QUERIES])
    out = engine_search(coll, fanout, qv, QUERIES, req)
    return [[(pid, score) for _, score, pid in f.top] for f in out]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.lists(st.sampled_from(IDS), min_size=1, max_size=4), st.integers(0, 3)),
        st.tuples(st.just("delete"), st.lists(st.sampled_from(IDS), min_size=1, max_size=3), st.just(0)),
        st.tuples(st.just("merge"), st.just([]), st.just(0)),
    ),
    min_size=1,
    max_size=7,
)


@pytest.mark.parametrize("shards", [1, 3])
@pytest.mark.parametrize("method", ["lucene", "okapi"])
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_segments_score_like_one_index(
    tmp_path_factory: pytest.TempPathFactory, shards: int, method: str, ops: list[tuple[str, list[str], int]]
) -> None:
    root = tmp_path_factory.mktemp("eq")
    params = BM25Params(method=method)
    base = CollectionSettings(
        name="c",
        embedder="none",
        dim=DIM,
        small_dim=SMALL,
        bm25=params,
        shards=shards,
        dense_index=DenseIndexParams(kind="flat"),
    )
    coll = CollectionStore(root).create(base)
    fanout = LocalFanout()
    for step, (op, ids, variant) in enumerate(ops):
        with coll.writer():
            if op == "upsert":
                docs = [_doc(i, variant) for i in dict.fromkeys(ids)]
                if isinstance(coll, ShardedCollection):
                    coll.upsert(docs)
                else:
                    coll.docstore.upsert(docs)
            elif op == "delete":
                for shard in coll.shard_list:
                    shard.docstore.delete(ids)
            if op == "merge":
                coll.merge(MERGE_ALL)
                coll._publish_set()
            else:
                coll.commit()
        ref = _reference(coll, root / f"ref{step}", params)
        for mode in ("dense", "bm25", "hybrid"):
            for group in (True, False):
                req = replace(RankRequest(), mode=mode, k=5, depth=8, group_by_doc=group)  # type: ignore[arg-type]
                got, want = _top(coll, fanout, req), _top(ref, fanout, req)
                for g, w in zip(got, want, strict=True):
                    assert [p for p, _ in g] == [p for p, _ in w], (step, op, mode, group)
                    assert np.allclose([s for _, s in g], [s for _, s in w], rtol=0, atol=1e-6)
