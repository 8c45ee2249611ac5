"""Undeclared fields through their columns (indexing/loose_column.py) answer every condition exactly as the scan
of one document's metadata (indexing/filter_match.py `matches`) does: values of every type, lists, nulls, nested
objects, integers past int64 and floats past 2**53, datetimes; and a filter stops once its deadline has passed."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing import deadline
from indexing.filter_match import each_matches, matches
from indexing.filter_parser import parse_filter
from indexing.filters import Schema, bind_ids
from indexing.payload import MAX_PREBUILT, Payload

HUGE = 10**400
NUMBERS: list[Any] = [
    *(0, 1, 2, 3, -7, 2**53, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64, -(2**64), HUGE, -HUGE),
    *(0.0, -0.0, 0.5, 1.0, 2.5, 3.0, float(2**53), 9.3e18, 1.8446744073709552e19, 1e308, -1e308),
]
STRINGS = ["a", "b", "", "2024-01-01", "2024-01-01T00:00:00Z", "2024-06-30T12:00:00+02:00", "9999-12-31", "x" * 70]
scalars = st.one_of(st.sampled_from(NUMBERS), st.integers(-5, 5), st.booleans(), st.sampled_from(STRINGS))
values = st.one_of(
    st.none(),
    scalars,
    st.lists(st.one_of(st.none(), scalars, st.just({"k": 1}), st.just([1, "a"])), max_size=5),
    st.just({"nested": 1}),
)
metadata = st.dictionaries(st.sampled_from(["v", "w"]), values, max_size=2)
bound = st.one_of(st.sampled_from(NUMBERS[:-2]), st.integers(-5, 5), st.sampled_from(STRINGS[:7]))
condition = st.one_of(
    st.builds(lambda v: {"key": "v", "match": {"value": v}}, scalars),
    st.builds(lambda vs: {"key": "v", "match": {"any": vs}}, st.lists(scalars, min_size=1, max_size=4)),
    st.builds(lambda op, b: {"key": "v", "range": {op: b}}, st.sampled_from(["gt", "gte", "lt", "lte"]), bound),
    st.builds(lambda lo, hi: {"key": "v", "range": {"gte": lo, "lt": hi}}, bound, bound),
    st.builds(lambda vs: {"key": "v", "match": {"except": vs}}, st.lists(scalars, min_size=1, max_size=4)),
    st.builds(
        lambda op, c: {"key": "v", "values_count": {op: c}},
        st.sampled_from(["gt", "gte", "lt", "lte"]),
        st.integers(0, 4),
    ),
    st.just({"exists": {"key": "v"}}),
    st.just({"is_null": {"key": "v"}}),
    st.just({"is_empty": {"key": "v"}}),
    st.just({"key": "absent", "match": {"value": 1}}),
    st.just({"key": "absent", "values_count": {"lt": 1}}),
    st.builds(lambda ids: {"has_id": ids}, st.lists(st.sampled_from(["d0", "d1", "d2", "d5"]), min_size=1, max_size=3)),
)


def _parse(raw: dict[str, Any]) -> Any:
    try:
        return parse_filter(raw)
    except ValueError:  # a range mixing datetime and number bounds: refused, nothing to compare
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(metadata, min_size=1, max_size=8), raws=st.lists(condition, min_size=1, max_size=3))
def test_an_undeclared_field_answers_as_the_scan_does(rows: list[dict[str, Any]], raws: list[dict[str, Any]]) -> None:
    shared = [rows[i % len(rows)] for i in range(len(rows) * 2)]  # rows of one document share one dict
    ids = [f"d{i % len(rows)}" for i in range(len(shared))]
    p = Payload(shared)
    docs = np.asarray([i % len(rows) for i in range(len(shared))], np.int64)  # a document's number, by row
    numbers = {f"d{i}": i for i in range(len(rows))}
    least = {"min_should": {"conditions": raws, "min_count": len(raws)}}
    for raw in [*raws, {"must_not": raws}, {"should": raws}, least, {**least, "must_not": raws[:1]}]:
        node = _parse(raw)
        if node is None:
            continue
        want = [matches(node, md, doc_id) for md, doc_id in zip(shared, ids, strict=True)]
        assert p.mask(bind_ids(node, numbers), {}, docs).tolist() == want, raw  # type: ignore[arg-type]
        assert each_matches(node, shared, ids) == want, raw


def test_numbers_compare_exactly_across_ints_floats_and_huge_integers() -> None:
    rows: list[dict[str, Any]] = [{"v": x} for x in NUMBERS] + [{"v": [True, "3", 3.0]}, {"v": None}, {}]
    p = Payload(rows)
    for b in NUMBERS:
        for raw in (
            {"key": "v", "match": {"value": b}},
            *({"key": "v", "range": {op: b}} for op in ("gt", "gte", "lt", "lte")),
            *({"key": "v", "range": {"gt": b, "lte": hi}} for hi in NUMBERS),
        ):
            node = parse_filter(raw)
            assert node is not None
            assert p.mask(node, {}).tolist() == [matches(node, md) for md in rows], raw


def test_a_column_is_made_once_per_field_and_only_for_fields_the_segment_holds() -> None:
    p = Payload([{"v": list(range(100))}, {"w": "a"}])
    for raw in ({"key": "v", "range": {"lt": 5}}, {"key": "v", "match": {"value": 7}}, {"exists": {"key": "nope"}}):
        node = parse_filter(raw)
        assert node is not None
        p.mask(node, {})
    assert set(p.loose) == {"v"}  # a field no document holds is answered without a column (or memory)
    assert p.loose["v"].ints.values.shape == (100,)


def test_a_filter_stops_when_its_deadline_has_passed() -> None:
    p = Payload([{"v": [1, 2, 3]}, {"v": 9}])
    node = parse_filter({"must_not": [{"key": "v", "range": {"lt": -i}} for i in range(8)]})
    assert node is not None
    with deadline.until(time.monotonic() - 1), pytest.raises(deadline.DeadlineExceeded):
        p.mask(node, {})
    assert not p.loose  # stopped before any column was made
    with deadline.until(None):
        assert p.mask(node, {}).tolist() == [True, True]
    deadline.check()  # outside a request: no deadline


def test_building_a_large_column_checks_the_deadline() -> None:
    from indexing.loose_column import CHECK_EVERY, LooseColumn

    calls: list[int] = []
    LooseColumn.build([{"v": i} for i in range(3 * CHECK_EVERY)], "v", lambda: calls.append(1))
    assert len(calls) == 3
    col = LooseColumn.build([{"v": i} for i in range(10)], "v")
    assert np.array_equal(col.ints.values, np.arange(10))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(metadata, min_size=1, max_size=8), raws=st.lists(condition, min_size=1, max_size=3))
def test_columns_built_at_load_answer_as_the_scan_does(rows: list[dict[str, Any]], raws: list[dict[str, Any]]) -> None:
    shared = [rows[i % len(rows)] for i in range(len(rows) * 2)]
    p = Payload(shared)
    p.index_undeclared({})  # what a segment's load does: every field held gets its column, in one pass
    built = dict(p.loose)
    docs = np.asarray([i % len(rows) for i in range(len(shared))], np.int64)
    for raw in [*raws, {"must_not": raws}]:
        node = _parse(raw)
        if node is None:
            continue
        want = [matches(node, md, f"d{d}") for md, d in zip(shared, docs.tolist(), strict=True)]
        bound = bind_ids(node, {f"d{i}": i for i in range(len(rows))})
        assert p.mask(bound, {}, docs).tolist() == want, raw  # type: ignore[arg-type]
    assert p.loose == built  # no filter built a column


def test_a_loaded_segment_has_every_undeclared_column_and_a_filter_builds_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from indexing.loose_column import LooseColumn

    rows: list[dict[str, Any]] = [{"tenant": "a", "year": 2020, "tags": ["x", "y"]}, {"tenant": "b", "n": None}, {}]
    p = Payload(rows)
    p.index({"tenant": "keyword"})
    p.index_undeclared({"tenant": "keyword"})
    assert set(p.loose) == {"year", "tags", "n"}  # the declared field has its typed column instead

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a column was built on the request path")

    monkeypatch.setattr(LooseColumn, "build", refuse)
    monkeypatch.setattr(LooseColumn, "build_many", refuse)
    for raw, want in (
        ({"key": "year", "range": {"gte": 2000}}, [0]),
        ({"key": "tags", "match": {"value": "y"}}, [0]),
        ({"is_null": {"key": "n"}}, [1]),
        ({"key": "tenant", "match": {"value": "b"}}, [1]),
        ({"exists": {"key": "absent"}}, []),
    ):
        node = parse_filter(raw, Schema({"tenant": "keyword"}))
        assert node is not None
        assert np.flatnonzero(p.mask(node, {"tenant": "keyword"})).tolist() == want, raw
    p.index_undeclared({})  # a later view of the same segment: nothing is built again
    assert set(p.loose) == {"year", "tags", "n"}


def test_past_the_cap_the_fields_held_by_fewest_documents_are_built_on_use() -> None:
    rows = [{f"k{j}": i for j in range(MAX_PREBUILT + 2) if i >= j} for i in range(MAX_PREBUILT + 2)]
    p = Payload(rows)
    p.index_undeclared({})
    assert set(p.loose) == {f"k{j}" for j in range(MAX_PREBUILT)}  # k0 is held by every row, k65 by one
    node = parse_filter({"key": f"k{MAX_PREBUILT + 1}", "range": {"gte": 0}})
    assert node is not None
    assert np.flatnonzero(p.mask(node, {})).tolist() == [MAX_PREBUILT + 1]
    assert f"k{MAX_PREBUILT + 1}" in p.loose


def test_one_pass_over_many_fields_makes_the_columns_one_field_at_a_time_makes() -> None:
    from indexing.loose_column import LooseColumn

    rows: list[dict[str, Any]] = [
        {"v": [1, "a", 2.5, True, None, 2**70], "w": "2024-01-01"},
        {"v": None},
        {"w": [3, {"k": 1}], "z": 1},
        {},
    ]
    many = LooseColumn.build_many(rows, ["v", "w", "z"])
    for key in ("v", "w", "z"):
        one = LooseColumn.build(rows, key)
        for name in ("present", "null"):
            assert getattr(many[key], name).tolist() == getattr(one, name).tolist()
        for name in ("ints", "floats", "bools", "strings", "dates"):
            a, b = getattr(many[key], name), getattr(one, name)
            assert a.entry.tolist() == b.entry.tolist() and a.values.tolist() == b.values.tolist()
        assert many[key].huge == one.huge and dict(many[key].vocab) == dict(one.vocab)
