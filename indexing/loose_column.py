"""The values of one undeclared metadata field over a segment's documents, as numpy arrays, so that a filter on a
field the schema does not declare is a few numpy operations per condition, not a Python loop over every row and
every element of its lists.

An undeclared field holds values of any type, so its values are split by type: integers (int64), floats, the
integers no int64 holds (a short list, compared in Python), booleans, strings (as codes of a vocabulary), and the
strings that read as ISO-8601 datetimes (epoch microseconds, for a range with datetime bounds). Each value keeps
the entry it came from (a segment's rows of one document share one entry, indexing/payload.py). A condition
answers exactly as indexing/filter_match.py `matches` does on each document: tests/indexing/test_loose_column.py
checks the two against each other.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexing.column_compare import compare
from indexing.filters import RANGE_OPS, Exists, IsNull, Match, Range, ValuesCount, parse_datetime

INT64 = (-(2**63), 2**63)
Check = Callable[[], None]  # raises to stop a long build (the request's deadline, indexing/deadline.py)
CHECK_EVERY = 4096  # entries between two checks while a column is built


@dataclass(frozen=True)
class Typed:
    """The values of one type: each with the entry it belongs to."""

    entry: np.ndarray  # (m,) int64
    values: np.ndarray  # (m,) int64 or float64

    @classmethod
    def of(cls, entries: list[int], values: list[Any], dtype: type) -> Typed:
        return cls(np.asarray(entries, np.int64), np.asarray(values, dtype))

    def entries_where(self, hit: np.ndarray, n: int) -> np.ndarray:
        out = np.zeros(n, bool)
        out[self.entry[hit]] = True
        return out


@dataclass(frozen=True)
class LooseColumn:
    n: int  # entries
    present: np.ndarray  # (n,) bool: at least one value that is not null (exists)
    null: np.ndarray  # (n,) bool: the field is there and null (is_null)
    count: np.ndarray  # (n,) int64: the values the field holds, of any type, nulls aside (values_count)
    ints: Typed
    floats: Typed
    bools: Typed  # 0 or 1
    strings: Typed  # codes of `vocab`
    dates: Typed  # the strings that are datetimes, in epoch microseconds
    huge: tuple[tuple[int, int], ...]  # (entry, integer) for integers past int64: compared in Python
    vocab: Mapping[str, int]

    @classmethod
    def build(cls, entries: Sequence[Mapping[str, Any]], key: str, check: Check | None = None) -> LooseColumn:
        return cls.build_many(entries, (key,), check)[key]

    @classmethod
    def build_many(
        cls, entries: Sequence[Mapping[str, Any]], keys: Iterable[str], check: Check | None = None
    ) -> dict[str, LooseColumn]:
        """The columns of `keys`, in one pass over the entries."""
        n = len(entries)
        acc = {k: _Values(n) for k in keys}
        if not acc:
            return {}
        for e, md in enumerate(entries):
            if check is not None and e % CHECK_EVERY == CHECK_EVERY - 1:
                check()
            if len(md) <= len(acc):
                for k, value in md.items():
                    if k in acc:
                        acc[k].add(e, value)
            else:
                for k, a in acc.items():
                    if k in md:
                        a.add(e, md[k])
        return {k: a.column() for k, a in acc.items()}

    def mask(self, node: Match | Range | ValuesCount | Exists | IsNull) -> np.ndarray:
        """(n,) bool: the entries whose document passes the condition."""
        if isinstance(node, Exists):
            return self.present.copy()
        if isinstance(node, IsNull):
            return self.null.copy()
        if isinstance(node, ValuesCount):
            hit = np.ones(self.n, bool)
            for op in RANGE_OPS:
                if getattr(node, op) is not None:
                    hit &= compare(self.count, op, getattr(node, op), False)
            return hit
        if isinstance(node, Match):
            return self._match(node)
        return self._range(node)

    def _match(self, node: Match) -> np.ndarray:
        """Entries holding one of the values; for an except, entries holding a value that is none of them."""
        n = self.n
        out = np.zeros(n, bool)
        ints: list[int] = []
        floats: list[float] = []
        bools: list[int] = []
        codes: list[int] = []
        numbers: list[Any] = []
        for tag, v in node.typed:
            if tag == "b":
                bools.append(int(v))
            elif tag == "s":
                if v in self.vocab:
                    codes.append(self.vocab[v])
            else:
                numbers.append(v)
                i, f = _exact_int(v), _exact_float(v)
                if i is not None:
                    ints.append(i)
                if f is not None:
                    floats.append(f)
        for col, wanted, dtype in (
            (self.ints, ints, np.int64),
            (self.floats, floats, np.float64),
            (self.bools, bools, np.int64),
            (self.strings, codes, np.int64),
        ):
            if node.exclude and col.values.size:
                out |= col.entries_where(np.isin(col.values, np.asarray(wanted, dtype), invert=True), n)
            elif wanted and col.values.size:
                out |= col.entries_where(np.isin(col.values, np.asarray(wanted, dtype)), n)
        for e, x in self.huge:
            if not out[e] and any(x == v for v in numbers) != node.exclude:
                out[e] = True
        return out

    def _range(self, node: Range) -> np.ndarray:
        n = self.n
        bounds = [(op, getattr(node, op)) for op in RANGE_OPS if getattr(node, op) is not None]
        columns = ((self.dates, False),) if node.dated else ((self.ints, False), (self.floats, True))
        out = np.zeros(n, bool)
        for col, floating in columns:
            if not col.values.size:
                continue
            hit = np.ones(col.values.shape[0], bool)
            for op, bound in bounds:
                hit &= compare(col.values, op, bound, floating)
            out |= col.entries_where(hit, n)
        if not node.dated:
            for e, x in self.huge:
                if not out[e] and all(_holds(x, op, b) for op, b in bounds):
                    out[e] = True
        return out


def _exact_int(v: float) -> int | None:
    """The int64 equal to the number `v`, or None (2.5, 2**63, a float past int64)."""
    if isinstance(v, float):
        if not v.is_integer():
            return None
        v = int(v)
    return v if INT64[0] <= v < INT64[1] else None


def _exact_float(v: float) -> float | None:
    """The float equal to the number `v`, or None (2**53 + 1, 10**400)."""
    if isinstance(v, float):
        return v
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if f == v else None


_PYTHON_OPS = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}


def _holds(x: int, op: str, bound: float) -> bool:
    return bool(_PYTHON_OPS[op](x, bound))


class _Values:
    """One field's values gathered entry by entry, split by type, then made into its column."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.present, self.null = np.zeros(n, bool), np.zeros(n, bool)
        self.count = np.zeros(n, np.int64)
        self.cols: dict[str, tuple[list[int], list[Any]]] = {t: ([], []) for t in ("i", "f", "b", "s")}
        self.huge: list[tuple[int, int]] = []
        self.vocab: dict[str, int] = {}

    def add(self, e: int, value: Any) -> None:
        if value is None:
            self.null[e] = True
            return
        for x in value if isinstance(value, list) else (value,):
            if x is None:
                continue
            self.present[e] = True
            self.count[e] += 1
            y: float
            if isinstance(x, bool):
                t, y = "b", int(x)
            elif isinstance(x, int):
                if not INT64[0] <= x < INT64[1]:
                    self.huge.append((e, x))
                    continue
                t, y = "i", x
            elif isinstance(x, float):
                t, y = "f", x
            elif isinstance(x, str):
                t, y = "s", self.vocab.setdefault(x, len(self.vocab))
            else:  # an object or a list inside the list: it exists, and equals or lies in no range
                continue
            self.cols[t][0].append(e)
            self.cols[t][1].append(y)

    def column(self) -> LooseColumn:
        cols = self.cols
        strings = Typed.of(*cols["s"], np.int64)
        date_of = [parse_datetime(s) for s in self.vocab]  # code -> epoch µs, or None
        is_date = np.asarray([d is not None for d in date_of], bool)
        date_values = np.asarray([d or 0 for d in date_of], np.int64)
        keep = is_date[strings.values] if strings.values.size else np.zeros(0, bool)
        dates = Typed(strings.entry[keep], date_values[strings.values[keep]])
        return LooseColumn(
            self.n,
            self.present,
            self.null,
            self.count,
            Typed.of(*cols["i"], np.int64),
            Typed.of(*cols["f"], np.float64),
            Typed.of(*cols["b"], np.int64),
            strings,
            dates,
            tuple(self.huge),
            self.vocab,
        )
