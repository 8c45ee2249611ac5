"""A filter's bounds, as docs/filters.md states them: at most 256 conditions (leaves: match, range, exists,
is_null; the nested filters that group them are not conditions), at most 256 nested filters, at most 8 levels;
a filter over a bound fails with the path of the first node past it."""

from __future__ import annotations

from typing import Any

import pytest

from indexing.filters import MAX_CONDITIONS, MAX_DEPTH, MAX_NESTED, Bool, FilterError, Schema, parse_filter

SCHEMA = Schema.from_json({"fields": {"tenant": "keyword", "year": "integer"}})


def _leaves(n: int) -> list[dict[str, Any]]:
    return [{"key": "tenant", "match": {"value": f"t{i}"}} for i in range(n)]


def test_the_documented_bounds() -> None:
    assert (MAX_CONDITIONS, MAX_NESTED, MAX_DEPTH) == (256, 256, 8)


@pytest.mark.parametrize("clause", ["must", "should", "must_not"])
def test_256_conditions_pass_and_the_257th_is_refused_by_its_path(clause: str) -> None:
    node = parse_filter({clause: _leaves(256)}, SCHEMA)
    assert isinstance(node, Bool) and len(getattr(node, clause)) == 256
    with pytest.raises(FilterError) as err:
        parse_filter({clause: _leaves(257)}, SCHEMA)
    assert err.value.path == f"filter.{clause}[256]"
    assert err.value.message == "a filter may hold at most 256 conditions"


def test_conditions_are_counted_across_clauses_and_nested_filters() -> None:
    # 4 nested filters of 64 conditions each: 256 conditions (and 5 boolean nodes) pass.
    raw: dict[str, Any] = {
        "must": [{"should": _leaves(64)}, {"must_not": _leaves(64)}],
        "should": [{"must": _leaves(64)}, {"must": [{"should": _leaves(64)}]}],
    }
    assert parse_filter(raw, SCHEMA) is not None
    raw["must_not"] = [{"exists": {"key": "year"}}]  # the 257th, read after must and should
    with pytest.raises(FilterError) as err:
        parse_filter(raw, SCHEMA)
    assert err.value.path == "filter.must_not[0]" and "at most 256 conditions" in err.value.message


def test_a_single_condition_at_the_root_counts_as_one() -> None:
    assert parse_filter({"key": "year", "range": {"gte": 2020}}, SCHEMA) is not None


def test_nested_filters_are_bounded_apart_from_conditions() -> None:
    # Empty nested filters hold no condition; they are bounded by their own limit (the root is not one of them).
    assert parse_filter({"must": [{"must": []}] * 256}, SCHEMA) is not None
    with pytest.raises(FilterError) as err:
        parse_filter({"must": [{"must": []}] * 257}, SCHEMA)
    assert err.value.path == "filter.must[256]"
    assert err.value.message == "a filter may hold at most 256 nested filters"
    # Both bounds at once: 256 nested filters each holding one condition.
    assert parse_filter({"should": [{"must": _leaves(1)}] * 256}, SCHEMA) is not None


def test_the_depth_bound_still_holds() -> None:
    raw: dict[str, Any] = {"must": _leaves(1)}
    for _ in range(MAX_DEPTH - 1):
        raw = {"must": [raw]}
    assert parse_filter(raw, SCHEMA) is not None  # the leaf sits at depth 8
    with pytest.raises(FilterError) as err:
        parse_filter({"must": [raw]}, SCHEMA)
    assert err.value.message == f"filters nest at most {MAX_DEPTH} levels deep"
