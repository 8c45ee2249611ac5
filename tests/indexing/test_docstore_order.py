"""Ordered scrolls' sort keys in the doc store (indexing/docstore_order.py): pages read through them, on 1 or 3 stores
merged, equal a sort of every document by (value, id) with the documents without a value last, whatever the page
size and wherever a cursor starts; the keys follow every write and schema change; each read is a range scan of an
index SQLite keeps, never a sort."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.collection import CollectionSettings
from indexing.docstore import DocStore, StoredDocument
from indexing.docstore_order import ORDER_KEY_CHARS, Ordering, OrderNotReady, Position, Row, merged, scan
from indexing.shards import shard_of
from indexing.store import CollectionStore
from models import EmbedderCache


def _doc(doc_id: str, metadata: dict[str, Any], dim: int = 4) -> StoredDocument:
    return StoredDocument(doc_id, "", "text", metadata, "h", [(0, 4)], np.ones((1, dim), np.float32))


def _values(value: Any) -> list[Any]:
    """The oracle's values of a field: a number or a list of them (nulls and other types are no value)."""
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, int) and not isinstance(v, bool)]


def oracle(docs: dict[str, dict[str, Any]], key: str, descending: bool) -> list[str]:
    """Every id by (smallest value ascending | largest value descending, id), documents without a value last."""
    keyed = {d: _values(md.get(key)) for d, md in docs.items()}
    present = [d for d, v in keyed.items() if v]
    pick = max if descending else min
    present.sort(key=lambda d: (-pick(keyed[d]) if descending else pick(keyed[d]), d))
    return present + sorted(d for d, v in keyed.items() if not v)


def _stores(tmp: Path, shards: int, docs: dict[str, dict[str, Any]], fields: dict[str, str]) -> list[DocStore]:
    stores = [DocStore(tmp / f"s{i}" / "docs.sqlite3") for i in range(shards)]
    half = len(docs) // 2
    items = list(docs.items())
    for i, s in enumerate(stores):  # half written before the field is declared (filled in), half after (written)
        s.upsert([_doc(d, md) for d, md in items[:half] if shard_of(d, shards) == i])
        s.sync_order_fields(fields)
        s.upsert([_doc(d, md) for d, md in items[half:] if shard_of(d, shards) == i])
    return stores


def _read(stores: list[DocStore], ordering: Ordering, after: Position | None, page: int) -> Iterator[Row]:
    return merged([scan(lambda a, n, s=s: s.ordered_after(ordering, a, n), after, page) for s in stores], ordering)


def _pages(stores: list[DocStore], ordering: Ordering, limit: int) -> list[str]:
    """Page through as a scroll does: each page starts afresh from the last position of the one before."""
    seen: list[str] = []
    after: Position | None = None
    while True:
        rows = list(itertools.islice(_read(stores, ordering, after, max(1, limit // 2)), limit))
        seen.extend(r[0] for r in rows)
        if len(rows) < limit:
            return seen
        after = (rows[-1][2], rows[-1][0])


VALUES = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.lists(st.one_of(st.integers(-3, 3), st.none()), max_size=3),
    st.text(max_size=2),  # not of the declared type: no value
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.dictionaries(
        st.text("abcé🌊\x00/", min_size=1, max_size=3), st.dictionaries(st.just("n"), VALUES), max_size=16
    ),
    shards=st.sampled_from([1, 3]),
    descending=st.booleans(),
    limit=st.integers(1, 7),
)
def test_pages_equal_a_sort_of_every_document(
    tmp_path_factory: pytest.TempPathFactory, docs: dict[str, Any], shards: int, descending: bool, limit: int
) -> None:
    stores = _stores(tmp_path_factory.mktemp("order"), shards, docs, {"n": "integer"})
    ordering = Ordering("n", "integer", descending)
    want = oracle(docs, "n", descending)
    assert _pages(stores, ordering, limit) == want
    # Started from any document's position, the rest of the order follows.
    keyed = {r[0]: r[2] for r in _read(stores, ordering, None, 3)}
    for i, doc_id in enumerate(want):
        assert [r[0] for r in _read(stores, ordering, (keyed[doc_id], doc_id), 2)] == want[i + 1 :]


def test_keys_follow_writes_and_schema_changes(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "docs.sqlite3")
    store.upsert([_doc("a", {"n": 3}), _doc("b", {"n": [5, 1]}), _doc("c", {})])
    assert store.sync_order_fields({"n": "integer"}) and not store.sync_order_fields({"n": "integer"})
    up, down = Ordering("n", "integer"), Ordering("n", "integer", descending=True)

    def ids(ordering: Ordering) -> list[str]:
        return [r[0] for r in store.ordered_after(ordering, None, 100)]

    assert (ids(up), ids(down)) == (["b", "a", "c"], ["b", "a", "c"])  # b: 1 ascending, 5 descending
    store.upsert([_doc("c", {"n": 0})])
    store.rewrite_metadata([("b", {"n": None}, "h2")])
    assert (ids(up), ids(down)) == (["c", "a", "b"], ["a", "c", "b"])
    store.delete(["a"])
    assert ids(up) == ["c", "b"]
    assert store._conn().execute("SELECT COUNT(*) FROM order_keys WHERE doc_id = 'a'").fetchone()[0] == 0
    store.sync_order_fields({"n": "float"})  # declared again with another type: its keys are made again
    assert store.order_fields() == {"n": "float"}
    assert [r[2] for r in store.ordered_after(Ordering("n", "float"), None, 100)] == [0.0, None]
    store.sync_order_fields({})
    assert store._conn().execute("SELECT COUNT(*) FROM order_keys").fetchone()[0] == 0


def test_nested_datetime_and_keyword_values_order_as_their_type(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "docs.sqlite3")
    store.sync_order_fields({"refs.at": "datetime", "name": "keyword"})
    long = "x" * ORDER_KEY_CHARS
    store.upsert(
        [
            _doc("1", {"refs": [{"at": "2024-01-01T10:00:00+02:00"}, {"at": "2025-01-01"}], "name": long + "b"}),
            _doc("2", {"refs": {"at": "2024-01-01T09:00:00Z"}, "name": long + "a"}),  # later than 1's first value
            _doc("3", {"refs.at": "2023-12-31", "name": "é"}),  # a top-level key with a dot is the same path
            _doc("4", {"name": "z"}),
        ]
    )
    at = [(r[0], r[2]) for r in store.ordered_after(Ordering("refs.at", "datetime"), None, 10)]
    micros = int(datetime(2024, 1, 1, 8, tzinfo=UTC).timestamp()) * 10**6
    assert at == [("3", at[0][1]), ("1", micros), ("2", micros + 3600 * 10**6), ("4", None)]
    # Keywords by code point; past ORDER_KEY_CHARS characters values tie, then ids decide.
    names = [r[0] for r in store.ordered_after(Ordering("name", "keyword"), None, 10)]
    assert names == ["1", "2", "4", "3"]


def test_every_read_is_a_range_scan_of_an_index(tmp_path: Path) -> None:
    store = DocStore(tmp_path / "docs.sqlite3")
    store.sync_order_fields({"n": "integer"})
    store.upsert([_doc(f"d{i:03d}", {"n": i % 7} if i % 5 else {}) for i in range(300)])
    conn = store._conn()
    plans: list[str] = []
    original = conn.execute

    def explain(sql: str, args: Any = ()) -> Any:
        if sql.startswith("SELECT k.doc_id"):
            plans.extend(str(row[3]) for row in original("EXPLAIN QUERY PLAN " + sql, args).fetchall())
        return original(sql, args)

    store._local.conn = _Explaining(conn, explain)
    for descending in (False, True):
        ordering = Ordering("n", "integer", descending)
        for after in (None, (3, "d100"), (None, "d050")):
            store.ordered_after(ordering, after, 400)
    assert plans and not [p for p in plans if "TEMP B-TREE" in p or p.startswith("SCAN")], plans
    assert any("order_keys_asc" in p for p in plans) and any("order_keys_desc" in p for p in plans)


class _Explaining:
    """A connection whose `execute` also records each page query's plan."""

    def __init__(self, conn: Any, execute: Any) -> None:
        self._conn, self.execute = conn, execute

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_store_written_before_ordered_scrolls_gets_its_keys_at_start_up(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    dim = EmbedderCache().get(tiny_embedder_dir).dim
    schema = {"fields": {"n": "integer"}, "strict": False}
    coll = CollectionStore(tmp_path).create(
        CollectionSettings(name="old", embedder=str(tiny_embedder_dir), dim=dim, shards=3, schema=schema)
    )
    docs = {f"d{i}": {"n": (i * 7) % 5} for i in range(12)}
    for shard in coll.shard_list:
        shard.docstore.upsert([_doc(d, md, dim) for d, md in docs.items() if coll.store_of(d) is shard.docstore])
        conn = shard.docstore._conn()  # as a store of an earlier version: no keys, no fields
        conn.execute("DELETE FROM order_keys")
        conn.execute("DELETE FROM order_fields")
    ordering = Ordering("n", "integer", descending=True)
    with pytest.raises(OrderNotReady):
        list(coll.scan_ordered(ordering, None, 5))
    coll.check_consistency()
    assert [r[0] for r in coll.scan_ordered(ordering, None, 5)] == oracle(docs, "n", descending=True)
