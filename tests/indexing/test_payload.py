"""A segment's typed columns: values JSON allows but numpy cannot hold are never a crash on load or search."""

from __future__ import annotations

import numpy as np

from indexing.filter_parser import parse_filter
from indexing.filters import Schema
from indexing.payload import Payload

HUGE = 10**400  # a JSON integer literal: no float holds it


def _payload(fields: dict[str, str], rows: list[dict[str, object]]) -> Payload:
    p = Payload(rows)
    p.index(fields)  # what loading a segment for a manifest that declares the fields does
    return p


def _rows(p: Payload, raw: dict[str, object], fields: dict[str, str]) -> list[int]:
    node = parse_filter(raw, Schema(fields))
    assert node is not None
    return np.flatnonzero(p.mask(node, fields)).tolist()


def test_an_integer_beyond_any_float_in_a_float_field_is_stored_not_indexed() -> None:
    fields = {"score": "float"}
    p = _payload(fields, [{"score": 1.5}, {"score": HUGE}, {"score": [HUGE, 2.5]}])
    assert _rows(p, {"key": "score", "range": {"gte": 0}}, fields) == [0, 2]
    assert _rows(p, {"exists": {"key": "score"}}, fields) == [0, 2]


def test_filter_numbers_beyond_the_columns_range_match_as_they_would() -> None:
    fields = {"year": "integer", "score": "float"}
    p = _payload(fields, [{"year": 2020, "score": 1.5}, {"year": -5, "score": -1e300}])
    assert _rows(p, {"key": "year", "match": {"value": 2**63}}, fields) == []
    assert _rows(p, {"key": "year", "match": {"any": [2020, -(2**63) - 1]}}, fields) == [0]
    assert _rows(p, {"key": "score", "range": {"gte": HUGE}}, fields) == []
    assert _rows(p, {"key": "score", "range": {"gt": -HUGE}}, fields) == [0, 1]
    assert _rows(p, {"key": "year", "range": {"lt": 2**64, "gte": -(2**70)}}, fields) == [0, 1]
    assert _rows(p, {"key": "year", "range": {"lte": -(2**64)}}, fields) == []


def test_an_integer_field_past_two_to_the_53_compares_with_float_bounds_exactly() -> None:
    # The scan (scroll, delete by filter) compares exactly; the column compared an int64 with a float bound as
    # float64, so count and search disagreed with it past 2**53.
    from indexing.filter_match import matches

    fields = {"year": "integer"}
    rows: list[dict[str, object]] = [{"year": 2**63 - 1}, {"year": 2**53 + 1}, {"year": 2**53}, {"year": 7}]
    p = _payload(fields, rows)
    for bounds in (
        {"gt": float(2**53)},
        {"lte": float(2**53)},
        {"gte": 9.223372036854775807e18},
        {"gt": 2.5, "lt": 7.5},
        {"gte": 7.0, "lte": 7.0},
        {"gt": 6.999},
        {"lt": -1e300},
    ):
        node = parse_filter({"key": "year", "range": bounds}, Schema(fields))
        assert node is not None
        scanned = [i for i, md in enumerate(rows) if matches(node, md)]
        assert _rows(p, {"key": "year", "range": bounds}, fields) == scanned, bounds


def test_the_whole_int64_range_is_an_integer_value() -> None:
    from indexing.metadata_fit import value_fits

    low, high = -(2**63), 2**63 - 1  # the column's int64 bounds, both ends included
    assert value_fits(low, "integer") and value_fits(high, "integer")
    assert not value_fits(low - 1, "integer") and not value_fits(high + 1, "integer")
    fields = {"year": "integer"}
    p = _payload(fields, [{"year": low}, {"year": high}, {"year": 0}])
    assert _rows(p, {"key": "year", "match": {"value": low}}, fields) == [0]
    assert _rows(p, {"key": "year", "range": {"lt": 0}}, fields) == [0]
    assert _rows(p, {"exists": {"key": "year"}}, fields) == [0, 1, 2]


def test_a_declared_fields_list_may_hold_nulls_among_its_values() -> None:
    from indexing.filter_match import matches
    from indexing.metadata_fit import value_fits

    assert value_fits(["x", None], "keyword") and value_fits([None], "keyword") and value_fits([None, 3], "integer")
    assert not value_fits(["x", 3], "keyword") and not value_fits([None, "3"], "integer")
    fields = {"tag": "keyword"}
    rows: list[dict[str, object]] = [{"tag": [None, "x"]}, {"tag": [None]}, {"tag": "x"}, {"tag": None}, {}]
    p = _payload(fields, rows)
    for raw in (
        {"key": "tag", "match": {"value": "x"}},
        {"exists": {"key": "tag"}},
        {"is_empty": {"key": "tag"}},
        {"key": "tag", "values_count": {"gte": 1}},
        {"key": "tag", "match": {"except": ["y"]}},
    ):
        node = parse_filter(raw, Schema(fields))
        assert node is not None
        assert _rows(p, raw, fields) == [i for i, md in enumerate(rows) if matches(node, md)], raw


BOUNDS: list[float] = [
    *(0, 1, 3, 2**53 - 1, 2**53, 2**53 + 1, 2**62 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64, 10**308, 2**1024, HUGE),
    *(-(2**53) - 1, -(2**63), -(2**63) - 1, -(10**308), -HUGE),
    *(0.5, 2.5, 3.0, float(2**53), 9.3e18, 9.223372036854775807e18, 1e308, -1e308, -0.0, 1.7976931348623157e308),
]


def test_every_range_bound_answers_on_a_declared_field_as_the_scan_does() -> None:
    # Integer bounds on a float column were rounded to float64 (2**53 + 1 matched 2**53), and those past int64
    # were taken as infinities (1e308 > 2**63 matched nothing); the scan compares as Python does.
    from indexing.filter_match import matches

    floats: list[dict[str, object]] = [{"v": x} for x in (1e308, -1e308, float(2**53), 1.0, 3.0, 0.5, -0.0, 9.3e18)]
    floats.append({"v": 1.7976931348623157e308})
    ints: list[dict[str, object]] = [{"v": x} for x in (2**63 - 1, -(2**63), 2**53 + 1, 2**53, 3, 0, -7)]
    for kind, rows in (("float", floats), ("integer", ints)):
        fields = {"v": kind}
        p = _payload(fields, rows)
        for bound in BOUNDS:
            for op in ("gt", "gte", "lt", "lte"):
                raw = {"key": "v", "range": {op: bound}}
                node = parse_filter(raw, Schema(fields))
                assert node is not None
                scanned = [i for i, md in enumerate(rows) if matches(node, md)]
                assert _rows(p, raw, fields) == scanned, (kind, op, bound)


def test_datetimes_compare_to_the_microsecond_in_any_year() -> None:
    # Epoch microseconds went through a float: neighbouring microseconds collided (1.5 % of them near 2000,
    # runs of them past 2255), and 9999-12-31T23:59:59.999999 became 10000-01-01.
    from indexing.filters import parse_datetime

    stored = [
        "2005-05-21T05:45:05.437584Z",
        "3000-01-01T00:00:00.000001Z",
        "9999-12-31T23:59:59.999999Z",
        "1600-01-01T00:00:00.000001+00:00",
    ]
    cases: list[tuple[dict[str, object], list[int]]] = [
        ({"gt": "2005-05-21T05:45:05.437583Z"}, [0, 1, 2]),
        ({"gt": "2005-05-21T05:45:05.437584Z", "lt": "3000-01-01T00:00:00.000001Z"}, []),
        ({"gt": "3000-01-01T00:00:00Z", "lt": "3000-01-01T00:00:00.000002Z"}, [1]),
        ({"lte": "9999-12-31T23:59:59.999990Z"}, [0, 1, 3]),
        ({"gte": "9999-12-31T23:59:59.999999Z"}, [2]),
        ({"lt": "1600-01-01T00:00:00.000001Z"}, []),
        ({"lte": "1600-01-01T01:00:00.000001+01:00"}, [3]),
    ]
    rows: list[dict[str, object]] = [{"at": t} for t in stored]
    for fields in ({"at": "datetime"}, {}):  # the typed column and the scan
        p = _payload(fields, rows)
        for bounds, expected in cases:
            assert _rows(p, {"key": "at", "range": bounds}, fields) == expected, (fields, bounds)
    year_10000 = 253_402_300_800 * 10**6  # 10000-01-01T00:00:00Z in epoch microseconds
    assert parse_datetime("9999-12-31T23:59:59.999999Z") == year_10000 - 1
    assert parse_datetime("1969-12-31T23:59:59.999999") == -1


def test_rfc_3339_lower_case_z_and_t_are_utc_as_upper_case_ones() -> None:
    from indexing.filters import parse_datetime

    want = parse_datetime("2024-05-01T10:00:00+00:00")
    assert want is not None
    for text in ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00z", "2024-05-01t10:00:00z"):
        assert parse_datetime(text) == want, text
    assert parse_datetime("z") is None and parse_datetime("") is None


def test_except_values_count_is_empty_and_min_should_on_declared_fields_answer_as_the_scan_does() -> None:
    from indexing.filter_match import matches

    fields = {"tag": "keyword", "year": "integer", "ok": "boolean"}
    rows: list[dict[str, object]] = [
        {"tag": "a", "year": 2020, "ok": True},
        {"tag": ["a", "b"], "year": [2020, 2021]},
        {"tag": ["a", None], "ok": False},
        {"tag": None, "year": None},
        {"tag": []},
        {},
    ]
    p = _payload(fields, rows)
    conditions: list[dict[str, object]] = [
        {"key": "tag", "match": {"except": ["a"]}},
        {"key": "tag", "match": {"except": ["z"]}},
        {"key": "year", "match": {"except": [2020]}},
        {"key": "ok", "match": {"except": [True]}},
        *({"key": k, "values_count": {op: c}} for k in fields for op in ("gt", "lte") for c in (0, 1, 2)),
        *({"is_empty": {"key": k}} for k in fields),
    ]
    for raw in [
        *conditions,
        {"min_should": {"conditions": conditions[:4], "min_count": 2}},
        {"must": [conditions[0]], "min_should": {"conditions": conditions[4:8], "min_count": 1}},
    ]:
        want = [i for i, md in enumerate(rows) if matches(parse_filter(raw, Schema(fields)), md)]  # type: ignore[arg-type]
        assert _rows(p, raw, fields) == want, raw
    assert _rows(p, {"key": "tag", "match": {"except": ["a"]}}, fields) == [1]  # b; a missing tag holds no value
    assert _rows(p, {"is_empty": {"key": "tag"}}, fields) == [3, 4, 5]
    assert _rows(p, {"key": "tag", "values_count": {"gte": 2}}, fields) == [1]  # ["a", None] holds one value
