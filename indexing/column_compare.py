"""How a numpy column of numbers answers a range bound exactly as Python compares the numbers (the scan's answer,
indexing/filter_match.py): declared columns (indexing/payload.py) and the columns of undeclared fields
(indexing/loose_column.py) both compare through `compare`."""

from __future__ import annotations

import math

import numpy as np

_OPS = {"gt": np.greater, "gte": np.greater_equal, "lt": np.less, "lte": np.less_equal}


def compare(values: np.ndarray, op: str, bound: float, floating: bool) -> np.ndarray:
    """`values <op> bound` as Python compares the numbers (the scan's answer, indexing/filter_match.py): the
    bound is rewritten into one of the column's own type that selects the same values, since numpy would round
    an integer bound to float64 against a float column, and a float bound against an int64 column."""
    const = _float_bound(op, bound) if floating else _int_bound(op, bound)
    if isinstance(const, bool):  # a bound beyond every value the column's type holds
        return np.full(values.shape[0], const)
    op, bound = const
    return _OPS[op](values, bound)  # type: ignore[no-any-return]


def _int_bound(op: str, bound: float) -> tuple[str, int] | bool:
    """A bound on an int64 column (integer, datetime) as an int64 that selects the same values (x > 2.5 is
    x > 2, x >= 2.5 is x >= 3), or what every int64 answers when the bound lies beyond them (x > 2**63: none)."""
    if isinstance(bound, float):  # finite: the parser refuses others
        bound = math.floor(bound) if op in ("gt", "lte") else math.ceil(bound)
    if bound >= 2**63:
        return op in ("lt", "lte")
    if bound < -(2**63):
        return op in ("gt", "gte")
    return op, int(bound)


def _float_bound(op: str, bound: float) -> tuple[str, float]:
    """A bound on a float64 column as a float that selects the same values. A float bound is one already; an
    integer no float equals (2**53 + 1, 2**63, 10**400) lies strictly between two neighbouring floats lo < b < hi
    (hi is inf past the largest float), and x > b is then x >= hi, x < b is x <= lo."""
    if isinstance(bound, float):
        return op, bound
    try:
        f = float(bound)
    except OverflowError:  # beyond the largest float
        f = math.inf if bound > 0 else -math.inf
    if f == bound:
        return op, f
    lo, hi = (math.nextafter(f, -math.inf), f) if f > bound else (f, math.nextafter(f, math.inf))
    return ("gte", hi) if op in ("gt", "gte") else ("lte", lo)
