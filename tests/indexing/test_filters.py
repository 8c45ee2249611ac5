"""Filters inside retrieval: every mode's filtered top-k is the brute-force top-k of the live passages that pass
(declared fields through their columns, undeclared ones by a scan, on 1 and 3 shards, flat and HNSW), and
malformed filters fail with the JSON path of the fault."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexing import segment_search
from indexing.collection import Collection, CollectionSettings
from indexing.dense import DenseIndexParams
from indexing.docstore import StoredDocument
from indexing.engine import LocalFanout
from indexing.engine import count as engine_count
from indexing.engine import search as engine_search
from indexing.filter_match import matches
from indexing.filter_parser import parse_filter
from indexing.filters import FilterError, Schema
from indexing.ranking import RankRequest
from indexing.store import CollectionStore

DIM = 16
WORDS = ["tide", "moon", "gravity", "sugar", "insulin", "magma", "crust", "carbon"]
SCHEMA = {"fields": {"tenant": "keyword", "year": "integer", "score": "float", "ok": "boolean", "at": "datetime"}}
FILTERS: list[dict[str, Any]] = [
    {"must": [{"key": "tenant", "match": {"value": "t1"}}]},
    {"must": [{"key": "tenant", "match": {"any": ["t0", "t2"]}}]},
    {"must": [{"key": "year", "range": {"gte": 2003, "lt": 2007}}]},
    {"must": [{"key": "score", "range": {"gt": 0.25}}], "must_not": [{"key": "ok", "match": {"value": True}}]},
    {"must": [{"key": "at", "range": {"gte": "2024-03-01T00:00:00Z", "lte": "2024-06-30T23:59:59+00:00"}}]},
    {"should": [{"exists": {"key": "extra"}}, {"is_null": {"key": "year"}}]},
    {"must": [{"key": "tags", "match": {"any": ["red"]}}]},  # undeclared, list values: a scan
    {"must": [{"key": "n", "range": {"gte": 10, "lt": 20}}]},  # undeclared number range
    {"must": [{"must_not": [{"key": "tenant", "match": {"value": "t0"}}]}, {"key": "year", "range": {"lte": 2004}}]},
    {"must": [{"key": "tenant", "match": {"value": "nobody"}}]},
]


def _vector(key: str) -> np.ndarray:
    rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big"))
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)  # type: ignore[no-any-return]


def _metadata(i: int) -> dict[str, Any]:
    md: dict[str, Any] = {
        "tenant": f"t{i % 3}",
        "year": None if i % 11 == 0 else 2000 + i % 9,
        "score": (i * 37 % 100) / 100,
        "ok": i % 2 == 0,
        "at": f"2024-{1 + i % 12:02d}-15T12:00:00Z",
        "tags": ["red", "blue"] if i % 4 == 0 else ["blue"],
        "n": i,
    }
    if i % 7 == 0:
        md["extra"] = "x"
    return md


def _doc(i: int, variant: int = 0) -> StoredDocument:
    rng = np.random.default_rng(variant * 1000 + i)
    text = " ".join(rng.choice(WORDS, size=int(rng.integers(2, 9))))
    cut = len(text) // 2 if i % 3 == 0 else len(text)
    spans = [(0, cut), (cut, len(text))] if cut < len(text) else [(0, len(text))]
    emb = np.stack([_vector(f"{i}/{variant}/{k}") for k in range(len(spans))])
    return StoredDocument(f"d{i}", "", text, _metadata(i), f"h{i}/{variant}", spans, emb)


def _build(root: Path, shards: int, kind: str) -> Collection:
    store = CollectionStore(root)
    coll = store.create(
        CollectionSettings(
            name=f"f{shards}{kind}",
            embedder="unused",
            dim=DIM,
            small_dim=8,
            dense_index=DenseIndexParams(kind=kind, hnsw_m=16),
            shards=shards,
            schema=SCHEMA,
        )
    )
    with coll.writer():
        for start in range(0, 90, 30):  # three commits: three segments per shard
            docs = [_doc(i) for i in range(start, start + 30)]
            if shards == 1:
                coll.docstore.upsert(docs)
            else:
                coll.upsert(docs)  # type: ignore[attr-defined]
            coll.commit()
        dead = [f"d{i}" for i in range(0, 90, 5)]
        for shard in coll.shard_list:
            shard.docstore.delete(dead)
        coll.commit()
    return coll


def _brute(coll: Collection, node: Any, qv: np.ndarray) -> list[tuple[str, float]]:
    """Per document, the best cosine of its live passages that pass; best first, ties by passage id."""
    best: dict[str, tuple[float, int]] = {}
    for shard in coll.shard_list:
        rows = shard.docstore._conn().execute(
            "SELECT p.pid, p.doc_id, p.embedding, d.metadata FROM passages p JOIN documents d USING (doc_id)"
        )
        for pid, doc_id, emb, md in rows:
            if node is not None and not matches(node, json.loads(md)):
                continue
            s = float(np.frombuffer(emb, np.float32).astype(np.float64) @ qv.astype(np.float64))
            if doc_id not in best or (s, -pid) > (best[doc_id][0], -best[doc_id][1]):
                best[doc_id] = (s, pid)
    order = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
    return [(d, s) for d, (s, _) in order]


@pytest.mark.parametrize(
    ("shards", "kind", "scan_share"), [(1, "flat", None), (3, "flat", None), (1, "hnsw", None), (1, "hnsw", 1.1)]
)
def test_filtered_search_is_brute_force_over_the_passing_passages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: int, kind: str, scan_share: float | None
) -> None:
    if scan_share is not None:  # every filtered HNSW search takes the planner's exact scan of the passing rows
        monkeypatch.setattr(segment_search, "EXACT_SCAN_SHARE", scan_share)
    coll = _build(tmp_path, shards, kind)
    fanout = LocalFanout()
    schema = Schema.from_json(SCHEMA)
    for qi, raw in enumerate(FILTERS):
        node = parse_filter(raw, schema)
        qv = _vector(f"query{qi}")[None]
        req = RankRequest(mode="dense", k=10, filter=node)
        (fused,) = engine_search(coll, fanout, qv, ["moon tide"], req)
        got = [(coll.shard_list[fused.shard_of[pid]].docstore.passage_docs([pid])[pid], s) for _, s, pid in fused.top]
        want = _brute(coll, node, qv[0])[:10]
        assert [d for d, _ in got] == [d for d, _ in want], raw
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
        # BM25: the unfiltered ranking of every live passage, narrowed to those that pass
        bm = RankRequest(mode="bm25", k=1000, filter=node)
        (filtered,) = engine_search(coll, fanout, None, ["moon tide gravity"], bm)
        (everything,) = engine_search(coll, fanout, None, ["moon tide gravity"], RankRequest(mode="bm25", k=1000))
        docs_passing = {d for d, _ in _brute(coll, node, qv[0])}
        keys = {k: coll.shard_list[everything.shard_of[p]].docstore.passage_docs([p])[p] for k, _, p in everything.top}
        expect = [(keys[k], s) for k, s, _ in everything.top if keys[k] in docs_passing]
        fkeys = {k: coll.shard_list[filtered.shard_of[p]].docstore.passage_docs([p])[p] for k, _, p in filtered.top}
        assert [(fkeys[k], s) for k, s, _ in filtered.top] == expect, raw
        assert engine_count(coll, fanout, node) == len(docs_passing)


DEEP: dict[str, Any] = {"must": [{"key": "n", "match": {"value": 1}}]}
for _ in range(9):
    DEEP = {"must": [DEEP]}
MALFORMED: list[tuple[Any, str]] = [
    ([], "filter"),
    ("tenant", "filter"),
    ({"must": {"key": "tenant"}}, "filter.must"),
    ({"must": [{}]}, "filter.must[0]"),
    ({"must": [{"key": "tenant"}]}, "filter.must[0]"),
    ({"must": [{"key": "tenant", "match": {"value": "a"}, "range": {"gt": 1}}]}, "filter.must[0]"),
    ({"must": [{"key": "", "match": {"value": "a"}}]}, "filter.must[0].key"),
    ({"must": [{"key": 3, "match": {"value": "a"}}]}, "filter.must[0].key"),
    ({"must": [{"key": "tenant", "match": {"value": 3}}]}, "filter.must[0].match.value"),
    ({"must": [{"key": "tenant", "match": {"any": []}}]}, "filter.must[0].match.any"),
    ({"must": [{"key": "tenant", "match": {"any": ["a", 2]}}]}, "filter.must[0].match.any[1]"),
    ({"must": [{"key": "tenant", "match": {"values": "a"}}]}, "filter.must[0].match"),
    ({"must": [{"key": "year", "match": {"value": "2020"}}]}, "filter.must[0].match.value"),
    ({"must": [{"key": "year", "match": {"value": True}}]}, "filter.must[0].match.value"),
    ({"must": [{"key": "ok", "match": {"value": 1}}]}, "filter.must[0].match.value"),
    ({"must": [{"key": "tenant", "range": {"gt": 1}}]}, "filter.must[0].range"),
    ({"must": [{"key": "year", "range": {"gte": "soon"}}]}, "filter.must[0].range.gte"),
    ({"must": [{"key": "year", "range": {}}]}, "filter.must[0].range"),
    ({"must": [{"key": "year", "range": {"above": 3}}]}, "filter.must[0].range"),
    ({"must": [{"key": "at", "range": {"gte": "2024-13-45"}}]}, "filter.must[0].range.gte"),
    ({"must": [{"key": "at", "range": {"gte": 1700000000}}]}, "filter.must[0].range.gte"),
    ({"must": [{"key": "at", "match": {"value": "2024-01-01"}}]}, "filter.must[0].match.value"),
    ({"should": [{"exists": "tenant"}]}, "filter.should[0].exists"),
    ({"should": [{"is_null": {"key": "a", "x": 1}}]}, "filter.should[0].is_null"),
    ({"must_not": [{"exists": {"key": "a"}, "key": "b"}]}, "filter.must_not[0]"),
    ({"must": [{"must": [{"key": "n", "range": {"lt": "x"}}]}]}, "filter.must[0].must[0].range.lt"),
    ({"must": [{"unknown": 1}]}, "filter.must[0]"),
    (DEEP, "filter.must[0].must[0].must[0].must[0].must[0].must[0].must[0].must[0]"),
]


@pytest.mark.parametrize(("raw", "path"), MALFORMED)
def test_a_malformed_filter_names_the_path_of_its_fault(raw: Any, path: str) -> None:
    with pytest.raises(FilterError) as err:
        parse_filter(raw, Schema.from_json(SCHEMA))
    assert err.value.path.startswith(path), (err.value.path, path)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_match_value_that_is_not_finite_is_refused(value: float) -> None:
    # MALFORMED is sent as JSON too, which cannot hold these: the API's test sends them as raw bytes.
    for raw, path in (
        ({"key": "n", "match": {"value": value}}, "filter.match.value"),
        ({"must": [{"key": "n", "match": {"any": [1, value]}}]}, "filter.must[0].match.any[1]"),
        ({"key": "n", "match": {"except": [value]}}, "filter.match.except[0]"),
    ):
        with pytest.raises(FilterError) as err:
            parse_filter(raw)
        assert err.value.path == path


def test_a_strict_schema_refuses_undeclared_fields() -> None:
    strict = Schema.from_json({**SCHEMA, "strict": True})
    with pytest.raises(FilterError) as err:
        parse_filter({"must": [{"key": "colour", "match": {"value": "red"}}]}, strict)
    assert err.value.path == "filter.must[0].key"
    assert parse_filter({"must": [{"key": "tenant", "match": {"value": "t1"}}]}, strict) is not None


def test_cached_filter_scopes_keep_true_and_one_apart(tmp_path: Path) -> None:
    coll = _build(tmp_path, 1, "flat")
    fanout = LocalFanout()
    one = parse_filter({"must": [{"key": "n", "match": {"value": 1}}]})
    true = parse_filter({"must": [{"key": "n", "match": {"value": True}}]})
    assert engine_count(coll, fanout, one) == 1  # d1 (n is undeclared: scanned, then cached)
    assert engine_count(coll, fanout, true) == 0
    assert engine_count(coll, fanout, one) == 1


def test_match_compares_by_type_with_a_set_of_values() -> None:
    """`any` values are looked up (a filter may hold 256 x 1,024 of them): True is not 1, 1 is 1.0, "1" is not 1,
    and a list or object in the metadata equals no filter value."""
    node = parse_filter({"must": [{"key": "v", "match": {"any": [1, True, "x", *map(str, range(1000))]}}]})
    assert node is not None
    for value, passes in [
        (1.0, True),
        (1, True),
        (True, True),
        (False, False),
        (0, False),
        ("1", True),  # one of the strings "0" to "999"
        ("x", True),
        ([2, "x"], True),  # a list passes when one of its values does
        ({"a": 1}, False),
        (None, False),
        (2.5, False),
    ]:
        assert matches(node, {"v": value}) is passes, value
    flag = parse_filter({"must": [{"key": "v", "match": {"value": 1}}]})
    assert flag is not None and not matches(flag, {"v": True}) and matches(flag, {"v": 1.0})
