"""A segment's payload: the metadata of the document of each row, and typed indexes of the declared fields.

`metadata.jsonl` holds one line per row, the document's metadata as the doc store keeps it (rows of one
document repeat it). The typed columns of the collection's declared fields are built from it when a
segment is loaded for a manifest that declares them (off the request path) and kept with the segment, so
a filter on a declared field is a few numpy operations. Fields nested in objects are named by their dotted
paths (`author.name`), as the flat view of indexing/metadata_paths.py holds them. A filter on an undeclared field
is numpy work too, over that field's values split by type (indexing/loose_column.py). Those columns are built with
the segment's load as well, for the undeclared fields its documents hold (the MAX_PREBUILT held by most documents, as
Elasticsearch's dynamic mapping indexes every field it meets), so a filter finds them ready; the column of a
further field is made the first time a filter names it in this segment, and kept. Every condition checks the
request's deadline (indexing/deadline.py) first.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from indexing import deadline
from indexing.column_compare import compare
from indexing.filters import RANGE_OPS, Bool, Exists, HasId, IsNull, Match, Node, Range, ValuesCount, parse_datetime
from indexing.loose_column import LooseColumn
from indexing.metadata_paths import flatten

FILE = "metadata.jsonl"
# Undeclared fields whose columns a segment's load builds: with 2 bool arrays of its entries each, 64 fields cost
# 128 bytes a document beside the values themselves; a segment whose documents hold more keys builds the rest on use.
MAX_PREBUILT = 64


@dataclass(frozen=True)
class Column:
    """The values of one declared field over a segment's rows (a list value gives several entries)."""

    kind: str
    row_of: np.ndarray  # (m,) int64 row of each value
    values: np.ndarray  # (m,) int64 (integer, boolean, datetime in epoch µs, keyword codes) or float64 (float)
    present: np.ndarray  # (n,) bool: the field holds at least one value of its type
    null: np.ndarray  # (n,) bool: the field is there and null
    count: np.ndarray  # (n,) int64: how many values the field holds (values_count; of any type, nulls aside)
    vocab: Mapping[str, int] = field(default_factory=dict)  # keyword -> code
    labels: tuple[str, ...] = ()  # code -> keyword (facets name values; made here, not on a request)

    @classmethod
    def build(cls, metadata: Sequence[Mapping[str, Any]], key: str, kind: str) -> Column:
        n = len(metadata)
        rows: list[int] = []
        vals: list[Any] = []
        null = np.zeros(n, bool)
        count = np.zeros(n, np.int64)
        vocab: dict[str, int] = {}
        for r, md in enumerate(metadata):
            if key not in md:
                continue
            v = md[key]
            if v is None:
                null[r] = True
                continue
            for x in v if isinstance(v, list) else (v,):
                count[r] += x is not None
                y = _typed(x, kind, vocab)
                if y is not None:
                    rows.append(r)
                    vals.append(y)
        row_of = np.asarray(rows, np.int64)
        present = np.zeros(n, bool)
        present[row_of] = True
        values = np.asarray(vals, np.float64 if kind == "float" else np.int64)
        return cls(kind, row_of, values, present, null, count, vocab, tuple(vocab))

    def rows_where(self, hit: np.ndarray, n: int) -> np.ndarray:
        mask = np.zeros(n, bool)
        mask[self.row_of[hit]] = True
        return mask


def _typed(x: Any, kind: str, vocab: dict[str, int]) -> Any:
    """A metadata value as the column stores it; None for a value not of the field's type (not indexed)."""
    if kind == "keyword":
        return vocab.setdefault(x, len(vocab)) if isinstance(x, str) else None
    if kind == "integer":
        return x if isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63 else None
    if kind == "boolean":
        return int(x) if isinstance(x, bool) else None
    if kind == "float":
        if not isinstance(x, int | float) or isinstance(x, bool):
            return None
        try:
            return float(x)
        except OverflowError:  # an integer beyond any float (10**400): stored, never indexed or matched
            return None
    if kind == "datetime":
        return parse_datetime(x)
    raise ValueError(f"unknown field type {kind!r}")


class Payload:
    def __init__(self, metadata: list[dict[str, Any]]) -> None:
        self.metadata = metadata
        self.columns: dict[tuple[str, str], Column] = {}
        # The distinct metadata (rows of one document share one dict), each row's entry, and the fields they hold:
        # an undeclared field's column is over entries, not rows, and only a field some entry holds gets one.
        entry_of: dict[int, int] = {}
        self.entries: list[Mapping[str, Any]] = []
        row_entry = np.empty(len(metadata), np.int64)
        for r, md in enumerate(metadata):
            e = entry_of.get(id(md))
            if e is None:
                e = entry_of[id(md)] = len(self.entries)
                self.entries.append(flatten(md))  # nested values under their dotted paths too (metadata_paths.py)
            row_entry[r] = e
        self.row_entry = row_entry
        self.flat_rows = [self.entries[e] for e in row_entry.tolist()]  # each row's entry: what columns read
        self.keys = frozenset(k for md in self.entries for k in md)
        # Undeclared fields' columns: built by index_undeclared, or by the first filter that names a further one.
        self.loose: dict[str, LooseColumn] = {}
        self.prebuilt = False

    def __len__(self) -> int:
        return len(self.metadata)

    @staticmethod
    def save(directory: Path, lines: Sequence[str]) -> None:
        """`lines`: each row's metadata as JSON text (one line each; JSON text holds no raw newline)."""
        with open(directory / FILE, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line)
                f.write("\n")

    @staticmethod
    def read_lines(directory: Path) -> list[str]:
        return (directory / FILE).read_text(encoding="utf-8").splitlines()

    @classmethod
    def load(cls, directory: Path) -> Payload:
        lines = cls.read_lines(directory)
        parsed: dict[str, dict[str, Any]] = {}  # rows of one document share one parsed dict
        out = []
        for line in lines:
            md = parsed.get(line)
            if md is None:
                md = parsed[line] = json.loads(line)
            out.append(md)
        return cls(out)

    def index(self, fields: Mapping[str, str]) -> None:
        """Build the columns of the declared fields not built yet (a segment is shared by views)."""
        for key, kind in fields.items():
            if (key, kind) not in self.columns:
                self.columns[(key, kind)] = Column.build(self.flat_rows, key, kind)

    def index_undeclared(self, declared: Mapping[str, str]) -> None:
        """Build the columns of the undeclared fields the documents hold (at most MAX_PREBUILT, those held by
        most documents first): one pass over the entries, the first time the segment is loaded (a segment is
        immutable, and later views reuse it)."""
        if self.prebuilt:
            return
        held = Counter(k for md in self.entries for k in md if k not in declared)
        self.loose.update(LooseColumn.build_many(self.entries, [k for k, _ in held.most_common(MAX_PREBUILT)]))
        self.prebuilt = True

    def _loose(self, key: str) -> LooseColumn:
        """The column of an undeclared field, made once per segment (one pass over the field's values, stopped
        at the request's deadline) and kept: a filter on it is then numpy work, like one on a declared field."""
        col = self.loose.get(key)
        if col is None:  # threads that race here build the same column; either one is kept
            col = self.loose[key] = LooseColumn.build(self.entries, key, deadline.check)
        return col

    def mask(self, node: Node, fields: Mapping[str, str], docs: np.ndarray | None = None) -> np.ndarray:
        """(n,) bool: the rows whose document passes the filter. `docs`: (n,) int64 the document number of each
        row, which a has_id (bound to numbers, indexing/filters.py bind_ids) is matched against."""
        n = len(self.metadata)
        if isinstance(node, Bool):
            out = np.ones(n, bool)
            for child in node.must:
                out &= self.mask(child, fields, docs)
            if node.should:
                any_ = np.zeros(n, bool)
                for child in node.should:
                    any_ |= self.mask(child, fields, docs)
                out &= any_
            for child in node.must_not:
                out &= ~self.mask(child, fields, docs)
            if node.min_count:
                held = np.zeros(n, np.int64)
                for child in node.min_should:
                    held += self.mask(child, fields, docs)
                out &= held >= node.min_count
            return out
        if isinstance(node, HasId):
            if node.docs is None or docs is None:
                raise ValueError("has_id reached a segment unbound to document numbers")
            return np.isin(docs, np.asarray(node.docs, np.int64))
        kind = fields.get(node.key)
        deadline.check()  # between conditions: a filter holds up to MAX_CONDITIONS of them
        col = self.columns.get((node.key, kind)) if kind else None
        if col is None:  # an undeclared field: its columnar values, over entries
            if node.key in self.keys:
                return self._loose(node.key).mask(node)[self.row_entry]
            # no document holds the field: it holds no value anywhere
            return _counted(np.zeros(n, np.int64), node) if isinstance(node, ValuesCount) else np.zeros(n, bool)
        if isinstance(node, Exists):
            return col.present.copy()
        if isinstance(node, IsNull):
            return col.null.copy()
        if isinstance(node, ValuesCount):
            return _counted(col.count, node)
        if isinstance(node, Match):
            if kind == "keyword":
                codes = [col.vocab[v] for v in node.values if v in col.vocab]
            else:  # a value outside int64 equals no stored value (and would overflow the array)
                codes = [int(v) for v in node.values if -(2**63) <= v < 2**63]
            return col.rows_where(np.isin(col.values, np.asarray(codes, np.int64), invert=node.exclude), n)
        assert isinstance(node, Range)
        hit = np.ones(col.values.shape[0], bool)
        for op in RANGE_OPS:
            bound = getattr(node, op)
            if bound is not None:
                hit &= compare(col.values, op, bound, kind == "float")
        return col.rows_where(hit, n)


def _counted(count: np.ndarray, node: ValuesCount) -> np.ndarray:
    """(n,) bool: the counts within the node's bounds."""
    hit = np.ones(count.shape[0], bool)
    for op in RANGE_OPS:
        bound = getattr(node, op)
        if bound is not None:
            hit &= compare(count, op, bound, False)
    return hit
