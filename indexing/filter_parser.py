"""The filter language read from JSON into the nodes of indexing/filters.py, checked against a collection's schema
and bounded (MAX_CONDITIONS, MAX_NESTED, MAX_DEPTH, MAX_ANY). Every fault is a FilterError naming its JSON path."""

from __future__ import annotations

import math
from typing import Any

from indexing.filters import (
    MAX_ANY,
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_IDS,
    MAX_NESTED,
    RANGE_OPS,
    Bool,
    Exists,
    FilterError,
    HasId,
    IsNull,
    Match,
    Node,
    Range,
    Schema,
    ValuesCount,
    is_number,
    parse_datetime,
)
from indexing.metadata_paths import path_key

CLAUSES = ("must", "should", "must_not", "min_should")
KEYED = {"exists": Exists, "is_null": IsNull, "is_empty": None}  # is_empty: the must_not of an exists
FIELD_OPS = ("match", "range", "values_count")
CONDITIONS = "must/should/must_not/min_should, key, exists, is_null, is_empty or has_id"


class _Parser:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.conditions = 0  # leaves so far
        self.nested = 0  # boolean nodes so far, the root aside
        self.ids = 0  # has_id ids so far

    def node(self, raw: Any, path: str, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise FilterError(path, f"filters nest at most {MAX_DEPTH} levels deep")
        if not isinstance(raw, dict):
            raise FilterError(path, "expected an object (a condition or a must/should/must_not filter)")
        keys = set(raw)
        if keys and keys <= set(CLAUSES):
            if depth > 0:
                self.nested += 1
                if self.nested > MAX_NESTED:
                    raise FilterError(path, f"a filter may hold at most {MAX_NESTED} nested filters")
            return self.boolean(raw, path, depth)
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise FilterError(path, f"a filter may hold at most {MAX_CONDITIONS} conditions")
        for op in (*KEYED, "has_id"):
            if op in raw:
                if keys != {op}:
                    raise FilterError(path, f"{op!r} stands alone; unexpected {sorted(keys - {op})}")
                return self.has_id(raw[op], f"{path}.has_id") if op == "has_id" else self.keyed(op, raw[op], path)
        if "key" in raw:
            return self.field(raw, path)
        if not keys:
            raise FilterError(path, f"an empty condition: give {CONDITIONS}")
        raise FilterError(path, f"unknown condition {sorted(keys)}: expected {CONDITIONS}")

    def boolean(self, raw: dict[str, Any], path: str, depth: int) -> Bool:
        parts: dict[str, tuple[Node, ...]] = {}
        for clause in ("must", "should", "must_not"):
            items = raw.get(clause, [])
            if not isinstance(items, list):
                raise FilterError(f"{path}.{clause}", "expected a list of conditions")
            parts[clause] = tuple(self.node(c, f"{path}.{clause}[{i}]", depth + 1) for i, c in enumerate(items))
        if "min_should" not in raw:
            return Bool(parts["must"], parts["should"], parts["must_not"])
        where = f"{path}.min_should"
        spec = raw["min_should"]
        if not isinstance(spec, dict) or set(spec) != {"conditions", "min_count"}:
            raise FilterError(where, 'expected {"conditions": [condition, ...], "min_count": n}')
        items, count = spec["conditions"], spec["min_count"]
        if not isinstance(items, list) or not items:
            raise FilterError(f"{where}.conditions", "expected a non-empty list of conditions")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= len(items):
            raise FilterError(f"{where}.min_count", f"expected an integer from 1 to {len(items)} (the conditions)")
        some = tuple(self.node(c, f"{where}.conditions[{i}]", depth + 1) for i, c in enumerate(items))
        return Bool(parts["must"], parts["should"], parts["must_not"], some, count)

    def keyed(self, op: str, inner: Any, path: str) -> Node:
        if not isinstance(inner, dict) or set(inner) != {"key"}:
            raise FilterError(f"{path}.{op}", 'expected {"key": "<field>"}')
        key = self.key(inner["key"], f"{path}.{op}.key")
        cls = KEYED[op]
        # is_empty as Qdrant has it: absent, null, [] or [null] -- exactly where exists does not hold
        return Bool(must_not=(Exists(key),)) if cls is None else cls(key)

    def has_id(self, ids: Any, path: str) -> HasId:
        if not isinstance(ids, list) or not ids:
            raise FilterError(path, "expected a non-empty list of document ids")
        if len(ids) > MAX_ANY:
            raise FilterError(path, f"at most {MAX_ANY} ids")
        for i, doc_id in enumerate(ids):
            if not isinstance(doc_id, str) or not doc_id:
                raise FilterError(f"{path}[{i}]", "expected a document id (a non-empty string)")
        self.ids += len(ids)
        if self.ids > MAX_IDS:
            raise FilterError(path, f"a filter may name at most {MAX_IDS} ids in all its has_id conditions")
        return HasId(tuple(dict.fromkeys(ids)))

    def key(self, key: Any, path: str) -> str:
        if not isinstance(key, str) or not key or len(key) > 256:
            raise FilterError(path, "expected a field name (a non-empty string of at most 256 characters)")
        key = path_key(key)  # `a[].b`, Qdrant's spelling of a path through a list, is `a.b`
        if not key:
            raise FilterError(path, "expected a field name, not only []")
        if self.schema.strict and key not in self.schema.fields:
            raise FilterError(path, f"unknown field {key!r}: this collection's schema is strict")
        return key

    def field(self, raw: dict[str, Any], path: str) -> Node:
        key = self.key(raw["key"], f"{path}.key")
        ops = set(raw) - {"key"}
        if len(ops) != 1 or not ops <= set(FIELD_OPS):
            raise FilterError(path, f"a field condition has exactly one of {', '.join(FIELD_OPS)}; got {sorted(ops)}")
        kind = self.schema.fields.get(key)
        if "match" in ops:
            return self.match(key, kind, raw["match"], f"{path}.match")
        if "values_count" in ops:
            return self.values_count(key, raw["values_count"], f"{path}.values_count")
        return self.range(key, kind, raw["range"], f"{path}.range")

    def match(self, key: str, kind: str | None, raw: Any, path: str) -> Match:
        if not isinstance(raw, dict) or len(raw) != 1 or not set(raw) <= {"value", "any", "except"}:
            raise FilterError(path, 'expected {"value": v}, {"any": [v, ...]} or {"except": [v, ...]}')
        if "value" in raw:
            values, where = [raw["value"]], [f"{path}.value"]
        else:
            (op,) = raw
            values = raw[op]
            if not isinstance(values, list) or not values:
                raise FilterError(f"{path}.{op}", "expected a non-empty list of values")
            if len(values) > MAX_ANY:
                raise FilterError(f"{path}.{op}", f"at most {MAX_ANY} values")
            where = [f"{path}.{op}[{i}]" for i in range(len(values))]
        typed = tuple(self.scalar(kind, v, w) for v, w in zip(values, where, strict=True))
        return Match(key, typed, exclude="except" in raw)

    def scalar(self, kind: str | None, v: Any, path: str) -> Any:
        if kind == "keyword" and not isinstance(v, str):
            raise FilterError(path, f"field is a keyword: expected a string, got {type(v).__name__}")
        if kind == "integer" and (not isinstance(v, int) or isinstance(v, bool)):
            raise FilterError(path, f"field is an integer: expected an integer, got {type(v).__name__}")
        if kind == "boolean" and not isinstance(v, bool):
            raise FilterError(path, f"field is a boolean: expected true or false, got {type(v).__name__}")
        if kind == "float":
            raise FilterError(path, "field is a float: match on it with a range, not equality")
        if kind == "datetime":
            raise FilterError(path, "field is a datetime: match on it with a range, not equality")
        if kind is None and not (isinstance(v, str | bool) or is_number(v)):
            raise FilterError(path, f"expected a string, number or boolean, got {type(v).__name__}")
        if isinstance(v, float) and not math.isfinite(v):  # NaN equals nothing; 1e400 is valid JSON, read as inf
            raise FilterError(path, f"expected a finite number, got {v}")
        return v

    def values_count(self, key: str, raw: Any, path: str) -> ValuesCount:
        if not isinstance(raw, dict) or not raw or not set(raw) <= set(RANGE_OPS):
            raise FilterError(path, f"expected an object with some of {list(RANGE_OPS)}")
        for op, v in raw.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise FilterError(f"{path}.{op}", f"expected a count (an integer, 0 or more), got {v!r}"[:200])
        return ValuesCount(key, **raw)

    def range(self, key: str, kind: str | None, raw: Any, path: str) -> Range:
        if not isinstance(raw, dict) or not raw or not set(raw) <= set(RANGE_OPS):
            raise FilterError(path, f"expected an object with some of {list(RANGE_OPS)}")
        if kind in ("keyword", "boolean"):
            raise FilterError(path, f"field is a {kind}: ranges apply to integer, float and datetime fields")
        bounds: dict[str, float] = {}
        dated = kind == "datetime" or (kind is None and any(isinstance(v, str) for v in raw.values()))
        for op, v in raw.items():
            where = f"{path}.{op}"
            if dated:
                t = parse_datetime(v)
                if t is None:
                    raise FilterError(where, f"expected an ISO-8601 datetime, got {v!r}"[:200])
                bounds[op] = t
            elif is_number(v) and v == v and abs(v) != float("inf"):  # noqa: PLR0124
                bounds[op] = v
            else:
                raise FilterError(where, f"expected a finite number, got {type(v).__name__}")
        return Range(key, dated, **bounds)


def parse_filter(raw: Any, schema: Schema | None = None, path: str = "filter") -> Node | None:
    """The parsed filter (None for no filter: null or {}); FilterError with the path of the first fault."""
    if raw is None or raw == {}:
        return None
    return _Parser(schema or Schema({})).node(raw, path, 0)
