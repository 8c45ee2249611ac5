"""A segment's typed columns: values JSON allows but numpy cannot hold are never a crash on load or search."""

from __future__ import annotations

import numpy as np

from indexing.filters import Schema, parse_filter
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
