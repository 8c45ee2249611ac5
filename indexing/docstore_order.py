"""Ordered scrolls: the sort keys of the declared fields, kept in a shard's doc store, and the reads that page through
them in order (`GET /collections/{name}/documents?order_by=`, as Qdrant's scroll `order_by` and Elasticsearch's
sort with `search_after`).

A scroll page must cost what it returns, never a sort of the collection, so the order is an index SQLite keeps:
`order_keys` holds, for every document and every field the store orders by (`order_fields`, the collection's
declared fields), the smallest and the largest value the document holds there (`lo`, `hi`; NULL for none). Two
indexes, (field, lo, doc_id) and (field, hi DESC, doc_id), give the next documents of an ascending and of a
descending scroll as one range scan each. The keys are written in the transaction that writes the metadata
(DocStore.upsert, rewrite_metadata) and deleted with the document (a trigger); a field newly declared is filled in
for every stored document when its schema is set, before the settings that declare it are published (and at
start-up, for a store written before ordered scrolls: Collection.check_consistency), never on a request.

The order is total: by (value, id), ties in id order in both directions, and documents without a value (the field
absent, null, `[]`, or no value of its type) last, in id order, as Elasticsearch's `missing: _last` default. A list
sorts by its smallest value ascending and its largest descending (Elasticsearch's default sort mode). Keywords
compare by their first ORDER_KEY_CHARS characters (code points): a bounded index entry and cursor, as
Elasticsearch's `ignore_above` bounds a keyword's.
"""

from __future__ import annotations

import heapq
import json
import math
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from indexing.filters import FIELD_TYPES, parse_datetime
from indexing.metadata_paths import flatten, path_key
from velaio.files import write_transaction

ORDER_KEY_CHARS = 256  # a keyword orders by this many characters (code points) at most
BACKFILL_PAGE = 1000  # documents read at a time while a new field's keys are filled in

SCHEMA = """
CREATE TABLE IF NOT EXISTS order_fields (field INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT NOT NULL);
-- lo, hi without a declared type: values are kept as written (integers, reals, text), compared as SQLite compares
-- them (numbers exactly, text as UTF-8 bytes, that is by code point, as Python compares str).
CREATE TABLE IF NOT EXISTS order_keys (
    doc_id TEXT NOT NULL,
    field INTEGER NOT NULL,
    lo,
    hi,
    PRIMARY KEY (doc_id, field)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS order_keys_asc ON order_keys(field, lo, doc_id);
CREATE INDEX IF NOT EXISTS order_keys_desc ON order_keys(field, hi DESC, doc_id);
CREATE TRIGGER IF NOT EXISTS documents_order_keys AFTER DELETE ON documents
BEGIN DELETE FROM order_keys WHERE doc_id = old.doc_id; END;
"""

Key = int | float | str
Position = tuple[Key | None, str]  # the last (value, id) visited; value None: among the documents without one
Row = tuple[str, str, Key | None]  # (doc_id, metadata JSON text, value)


class OrderByError(ValueError):
    """A scroll's order_by names a field it cannot order by (not declared)."""


class OrderNotReady(ValueError):
    """The doc store does not (yet) keep the field's keys as the schema read declares it: a schema changing
    meanwhile in another process."""


@dataclass(frozen=True)
class Ordering:
    field: str
    kind: str
    descending: bool = False


def check_order_field(key: str, fields: Mapping[str, str]) -> str:
    """The declared type of `key` (`refs[].year`, Qdrant's spelling, is `refs.year`); OrderByError otherwise."""
    kind = fields.get(path_key(key))
    if kind is None:
        raise OrderByError(
            f"order_by: field {key!r} is not declared: a scroll orders by declared fields "
            "(declare it with PUT /collections/{name}/schema)"
        )
    return kind


def sort_key(value: Any, kind: str) -> Key | None:
    """One metadata value as the order compares it; None for a value not of the field's type (or null)."""
    if kind == "keyword":
        return value[:ORDER_KEY_CHARS] if isinstance(value, str) else None
    if isinstance(value, bool):
        return int(value) if kind == "boolean" else None
    if kind == "integer":
        return value if isinstance(value, int) and -(2**63) <= value < 2**63 else None
    if kind == "float":
        if not isinstance(value, int | float):
            return None
        try:
            x = float(value)
        except OverflowError:  # an integer beyond any float (10**400): stored, never ordered
            return None
        return None if math.isnan(x) else x
    if kind == "datetime":
        return parse_datetime(value)
    return None


def bounds(flat: Mapping[str, Any], name: str, kind: str) -> tuple[Key | None, Key | None]:
    """The smallest and largest value of the field in a document's flat metadata (metadata_paths.flatten)."""
    value = flat.get(name)
    keys = [k for x in (value if isinstance(value, list) else [value]) if (k := sort_key(x, kind)) is not None]
    if not keys:
        return None, None
    return min(keys), max(keys)  # type: ignore[type-var]  # one kind: all numbers or all str


def write_keys(conn: sqlite3.Connection, docs: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """The keys of these documents' metadata for every field the store orders by; inside the caller's write
    transaction, which reads the fields too, so a field declared by another process is never missed."""
    fields = conn.execute("SELECT field, name, kind FROM order_fields").fetchall()
    if fields:
        conn.executemany(
            "INSERT OR REPLACE INTO order_keys(doc_id, field, lo, hi) VALUES (?,?,?,?)", _rows(docs, fields)
        )


def _rows(
    docs: Iterable[tuple[str, Mapping[str, Any]]], fields: Sequence[tuple[int, str, str]]
) -> Iterator[tuple[str, int, Key | None, Key | None]]:
    for doc_id, metadata in docs:
        flat = flatten(metadata)
        for num, name, kind in fields:
            yield (doc_id, num, *bounds(flat, name, kind))


def ordered_fields(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT name, kind FROM order_fields").fetchall())


def sync_fields(conn: sqlite3.Connection, fields: Mapping[str, str]) -> bool:
    """Order by exactly `fields` {name: kind}: the keys of a field no longer there (or of another kind) are dropped,
    those of a new one written for every stored document, in one write transaction (writes are serialised by it, so
    none is missed). A read when nothing changes. True when something was written."""
    wanted = {name: kind for name, kind in fields.items() if kind in FIELD_TYPES}
    if ordered_fields(conn) == wanted:
        return False
    with write_transaction(conn):
        have = conn.execute("SELECT field, name, kind FROM order_fields").fetchall()
        for num, name, kind in have:
            if wanted.get(name) != kind:
                conn.execute("DELETE FROM order_keys WHERE field = ?", (num,))
                conn.execute("DELETE FROM order_fields WHERE field = ?", (num,))
        kept = {name for _, name, kind in have if wanted.get(name) == kind}
        new = []
        for name, kind in wanted.items():
            if name not in kept:
                num = conn.execute("INSERT INTO order_fields(name, kind) VALUES (?, ?)", (name, kind)).lastrowid
                new.append((int(num or 0), name, kind))
        after = 0
        while new:
            page = conn.execute(
                "SELECT rowid, doc_id, metadata FROM documents WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (after, BACKFILL_PAGE),
            ).fetchall()
            if not page:
                break
            docs = [(doc_id, json.loads(text)) for _, doc_id, text in page]
            conn.executemany(
                "INSERT OR REPLACE INTO order_keys(doc_id, field, lo, hi) VALUES (?,?,?,?)", _rows(docs, new)
            )
            after = page[-1][0]
    return True


# A page's reads. CROSS JOIN: SQLite then walks order_keys' index in order and looks each document up by its key,
# never the other way round (which would read every document to sort them).
_SELECT = "SELECT k.doc_id, d.metadata, k.{col} FROM order_keys k CROSS JOIN documents d ON d.doc_id = k.doc_id "


def rows_after(conn: sqlite3.Connection, ordering: Ordering, after: Position | None, limit: int) -> list[Row]:
    """The first `limit` documents past `after` in the ordering: the rest of its value's ties, then the values past
    it, then the documents without a value. Call it inside one read transaction (DocStoreReads._snapshot)."""
    found = conn.execute("SELECT field, kind FROM order_fields WHERE name = ?", (ordering.field,)).fetchone()
    if found is None or found[1] != ordering.kind:
        raise OrderNotReady(f"order_by: field {ordering.field!r} is not ordered by this collection yet")
    num = found[0]
    col = "hi" if ordering.descending else "lo"
    select = _SELECT.format(col=col) + "WHERE k.field = ? AND "
    by_value = f"ORDER BY k.{col}{' DESC' if ordering.descending else ''}, k.doc_id LIMIT ?"
    past = "<" if ordering.descending else ">"
    out: list[Row] = []

    def take(sql: str, *args: Any) -> None:
        out.extend(conn.execute(select + sql, (num, *args, limit - len(out))).fetchall())

    if after is None:
        take(f"k.{col} IS NOT NULL {by_value}")
    elif after[0] is not None:
        take(f"k.{col} = ? AND k.doc_id > ? ORDER BY k.doc_id LIMIT ?", after[0], after[1])
        if len(out) < limit:
            take(f"k.{col} {past} ? {by_value}", after[0])
    if len(out) < limit:
        if after is None or after[0] is not None:
            take(f"k.{col} IS NULL ORDER BY k.doc_id LIMIT ?")
        else:
            take(f"k.{col} IS NULL AND k.doc_id > ? ORDER BY k.doc_id LIMIT ?", after[1])
    return out


class _Reversed:
    """A value that sorts in reverse (a descending scroll merges its shards' streams with ids still ascending)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and bool(self.value == other.value)

    __hash__ = None  # type: ignore[assignment]


def merge_key(descending: bool) -> Callable[[Row], tuple[bool, Any, str]]:
    """The order of rows as the shards give them: documents with a value first, by value, then by id."""
    if descending:
        return lambda row: (row[2] is None, _Reversed(row[2]), row[0])
    return lambda row: (row[2] is None, row[2], row[0])


def merged(streams: list[Iterator[Row]], ordering: Ordering) -> Iterator[Row]:
    """The shards' ordered streams as one (a document lives in one shard)."""
    return streams[0] if len(streams) == 1 else heapq.merge(*streams, key=merge_key(ordering.descending))


def scan(read: Callable[[Position | None, int], list[Row]], after: Position | None, page: int) -> Iterator[Row]:
    """One shard's rows past `after`, read `page` at a time as the caller goes on (a caller that stops early reads
    little more)."""
    while True:
        rows = read(after, page)
        yield from rows
        if len(rows) < page:
            return
        after = (rows[-1][2], rows[-1][0])
