"""A filter's bounds, as docs/filters.md states them: at most 256 conditions (leaves: match, range, exists,
is_null; the nested filters that group them are not conditions), at most 256 nested filters, at most 8 levels;
a filter over a bound fails with the path of the first node past it."""

from __future__ import annotations

from typing import Any

import pytest

from indexing.filter_parser import parse_filter
from indexing.filters import MAX_CONDITIONS, MAX_DEPTH, MAX_NESTED, Bool, FilterError, Schema

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


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"has_id": []}, "filter.has_id"),
        ({"has_id": "a"}, "filter.has_id"),
        ({"has_id": ["a", 7]}, "filter.has_id[1]"),
        ({"has_id": [f"d{i}" for i in range(1025)]}, "filter.has_id"),
        ({"has_id": ["a"], "key": "x"}, "filter"),
        ({"exists": {"key": "a"}, "key": "x", "match": {"value": 1}}, "filter"),
        ({"key": "tag", "match": {"except": []}}, "filter.match.except"),
        ({"key": "tag", "match": {"except": "a"}}, "filter.match.except"),
        ({"key": "tag", "match": {"except": [{"a": 1}]}}, "filter.match.except[0]"),
        ({"key": "tag", "values_count": {"gte": -1}}, "filter.values_count.gte"),
        ({"key": "tag", "values_count": {"gte": 1.5}}, "filter.values_count.gte"),
        ({"key": "tag", "values_count": {"gte": True}}, "filter.values_count.gte"),
        ({"key": "tag", "values_count": {}}, "filter.values_count"),
        ({"key": "tag", "values_count": {"eq": 1}}, "filter.values_count"),
        ({"is_empty": {"key": ""}}, "filter.is_empty.key"),
        ({"is_empty": "tag"}, "filter.is_empty"),
        ({"min_should": {"conditions": [], "min_count": 1}}, "filter.min_should.conditions"),
        ({"min_should": {"conditions": [{"exists": {"key": "a"}}], "min_count": 2}}, "filter.min_should.min_count"),
        ({"min_should": {"conditions": [{"exists": {"key": "a"}}], "min_count": 0}}, "filter.min_should.min_count"),
        ({"min_should": {"conditions": [{"exists": {"key": "a"}}]}}, "filter.min_should"),
        ({"min_should": [{"exists": {"key": "a"}}]}, "filter.min_should"),
        ({"min_should": {"conditions": [{"bad": 1}], "min_count": 1}}, "filter.min_should.conditions[0]"),
    ],
)
def test_the_further_conditions_refuse_bad_shapes_naming_their_path(raw: dict[str, object], path: str) -> None:
    with pytest.raises(FilterError) as err:
        parse_filter(raw, Schema({}))
    assert err.value.path == path


def test_a_standalone_condition_beside_a_field_says_it_stands_alone() -> None:
    with pytest.raises(FilterError, match="'has_id' stands alone; unexpected \\['key'\\]"):
        parse_filter({"has_id": ["A"], "key": "tenant"})


def test_a_filter_names_at_most_ten_thousand_ids() -> None:
    ids = [f"d{i}" for i in range(1000)]
    assert parse_filter({"should": [{"has_id": ids}] * 10}) is not None
    with pytest.raises(FilterError, match="at most 10000 ids") as err:
        parse_filter({"should": [{"has_id": ids}] * 11})
    assert err.value.path == "filter.should[10].has_id"


def test_min_should_conditions_count_towards_the_limits() -> None:
    with pytest.raises(FilterError, match="at most 256 conditions"):
        parse_filter({"min_should": {"conditions": _leaves(MAX_CONDITIONS + 1), "min_count": 1}})
    assert parse_filter({"min_should": {"conditions": _leaves(MAX_CONDITIONS), "min_count": 1}}) is not None


def test_is_empty_is_the_must_not_of_exists_and_has_id_keeps_each_id_once() -> None:
    from indexing.filters import Exists, HasId

    assert parse_filter({"is_empty": {"key": "a"}}) == Bool(must_not=(Exists("a"),))
    assert parse_filter({"has_id": ["b", "a", "b"]}) == HasId(("b", "a"))
