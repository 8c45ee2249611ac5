"""Metadata filters: the JSON language and its checks against a collection's schema (indexing/filter_match.py
evaluates a parsed filter on one document's metadata).

The shape is Qdrant's. A filter is a boolean node:

    {"must": [cond, ...], "should": [cond, ...], "must_not": [cond, ...]}

`must`: every condition holds; `should`: at least one does (when the list is non-empty); `must_not`: none
does. A condition is a nested filter or one of

    {"key": "tenant", "match": {"value": "acme"}}            equality (keyword, integer, boolean)
    {"key": "tenant", "match": {"any": ["acme", "globex"]}}   any of
    {"key": "year", "range": {"gte": 2020, "lt": 2024}}       numbers, or ISO-8601 datetimes
    {"exists": {"key": "author"}}                             present and not null
    {"is_null": {"key": "author"}}                            present and null

A metadata value may be a list: a condition on it holds when it holds for one of its elements. Keys are
top-level metadata fields. Fields declared in the collection's schema (keyword, integer, float, boolean,
datetime) are checked here, so that `{"year": {"match": {"value": "2020"}}}` on an integer field is an
error rather than a filter that silently matches nothing, and are indexed per segment (indexing/payload.py);
other fields are matched by a scan of the segments' stored metadata, unless the schema is strict.

Every fault is a FilterError naming the JSON path of the fault ("filter.must[0].range.gte").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

FieldType = Literal["keyword", "integer", "float", "boolean", "datetime"]
FIELD_TYPES: tuple[str, ...] = ("keyword", "integer", "float", "boolean", "datetime")
MAX_CONDITIONS = 256  # a filter's leaf conditions (match, range, exists, is_null): bounds the work of one request
MAX_NESTED = 256  # a filter's nested filters (boolean nodes below the root), bounded apart: {"must": []} holds none
MAX_DEPTH = 8
MAX_ANY = 1024  # values of one any-of
RANGE_OPS = ("gt", "gte", "lt", "lte")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


class FilterError(ValueError):
    """A filter that cannot run: malformed, of the wrong type for its field, or naming an unknown field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


@dataclass(frozen=True)
class Schema:
    """The typed metadata fields of a collection; strict: a filter may name no other field."""

    fields: Mapping[str, str]
    strict: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Schema:
        d = d or {}
        return cls(dict(d.get("fields", {})), bool(d.get("strict", False)))

    def to_json(self) -> dict[str, Any]:
        return {"fields": dict(self.fields), "strict": self.strict}


# --- the parsed filter -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Match:
    key: str
    values: tuple[Any, ...]  # any of; datetimes as epoch microseconds
    # The values as a set (a row's value is looked up, not compared with each of up to MAX_ANY values)
    typed: frozenset[tuple[str, Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "typed", frozenset(filter(None, map(typed_key, self.values))))


@dataclass(frozen=True)
class Range:
    key: str
    dated: bool = False  # bounds are datetimes (epoch microseconds): values compare as parsed ISO-8601 text
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None


@dataclass(frozen=True)
class Exists:
    key: str


@dataclass(frozen=True)
class IsNull:
    key: str


@dataclass(frozen=True)
class Bool:
    must: tuple[Node, ...] = ()
    should: tuple[Node, ...] = ()
    must_not: tuple[Node, ...] = ()


Node = Match | Range | Exists | IsNull | Bool


def parse_datetime(value: Any) -> int | None:
    """ISO-8601 text -> epoch microseconds, exactly (UTC; a naive time is taken as UTC); None when it is not one.
    Stored values and filter bounds both come through here."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        # RFC 3339 allows a lower-case "z" for UTC, which fromisoformat does not read
        t = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    # In integers: t.timestamp() is a float, which loses microseconds (and whole runs of them far from 1970)
    return (t - EPOCH) // MICROSECOND


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


class _Parser:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.conditions = 0  # leaves so far
        self.nested = 0  # boolean nodes so far, the root aside

    def node(self, raw: Any, path: str, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise FilterError(path, f"filters nest at most {MAX_DEPTH} levels deep")
        if not isinstance(raw, dict):
            raise FilterError(path, "expected an object (a condition or a must/should/must_not filter)")
        keys = set(raw)
        if keys and keys <= {"must", "should", "must_not"}:
            if depth > 0:
                self.nested += 1
                if self.nested > MAX_NESTED:
                    raise FilterError(path, f"a filter may hold at most {MAX_NESTED} nested filters")
            return self.boolean(raw, path, depth)
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise FilterError(path, f"a filter may hold at most {MAX_CONDITIONS} conditions")
        if "key" in raw:
            return self.field(raw, path)
        for op, cls in (("exists", Exists), ("is_null", IsNull)):
            if op in raw:
                if keys != {op}:
                    raise FilterError(path, f"{op!r} stands alone; unexpected {sorted(keys - {op})}")
                inner = raw[op]
                if not isinstance(inner, dict) or set(inner) != {"key"}:
                    raise FilterError(f"{path}.{op}", 'expected {"key": "<field>"}')
                return cls(self.key(inner["key"], f"{path}.{op}.key"))
        if not keys:
            raise FilterError(path, "an empty condition: give must, should, must_not, key, exists or is_null")
        raise FilterError(
            path, f"unknown condition {sorted(keys)}: expected must/should/must_not, key, exists, is_null"
        )

    def boolean(self, raw: dict[str, Any], path: str, depth: int) -> Bool:
        parts: dict[str, tuple[Node, ...]] = {}
        for clause in ("must", "should", "must_not"):
            items = raw.get(clause, [])
            if not isinstance(items, list):
                raise FilterError(f"{path}.{clause}", "expected a list of conditions")
            parts[clause] = tuple(self.node(c, f"{path}.{clause}[{i}]", depth + 1) for i, c in enumerate(items))
        return Bool(**parts)

    def key(self, key: Any, path: str) -> str:
        if not isinstance(key, str) or not key or len(key) > 256:
            raise FilterError(path, "expected a field name (a non-empty string of at most 256 characters)")
        if self.schema.strict and key not in self.schema.fields:
            raise FilterError(path, f"unknown field {key!r}: this collection's schema is strict")
        return key

    def field(self, raw: dict[str, Any], path: str) -> Node:
        key = self.key(raw["key"], f"{path}.key")
        ops = set(raw) - {"key"}
        if len(ops) != 1 or not ops <= {"match", "range"}:
            raise FilterError(path, f"a field condition has exactly one of match or range; got {sorted(ops)}")
        kind = self.schema.fields.get(key)
        if "match" in ops:
            return self.match(key, kind, raw["match"], f"{path}.match")
        return self.range(key, kind, raw["range"], f"{path}.range")

    def match(self, key: str, kind: str | None, raw: Any, path: str) -> Match:
        if not isinstance(raw, dict) or len(raw) != 1 or not set(raw) <= {"value", "any"}:
            raise FilterError(path, 'expected {"value": v} or {"any": [v, ...]}')
        if "value" in raw:
            values, where = [raw["value"]], [f"{path}.value"]
        else:
            values = raw["any"]
            if not isinstance(values, list) or not values:
                raise FilterError(f"{path}.any", "expected a non-empty list of values")
            if len(values) > MAX_ANY:
                raise FilterError(f"{path}.any", f"at most {MAX_ANY} values")
            where = [f"{path}.any[{i}]" for i in range(len(values))]
        return Match(key, tuple(self.scalar(kind, v, w) for v, w in zip(values, where, strict=True)))

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
        if isinstance(v, float) and v != v:  # noqa: PLR0124  NaN equals nothing
            raise FilterError(path, "NaN is not a value")
        return v

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


def typed_key(v: Any) -> tuple[str, Any] | None:
    """What equality in a filter compares: booleans apart from numbers (True is not 1), 1 equal to 1.0 (they hash
    alike), strings as they are; None for a value that equals no filter value (a list, an object)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, int | float):
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    return None
