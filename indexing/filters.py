"""Metadata filters: the parsed filter's nodes, and what parsing and evaluating them share (indexing/filter_parser.py
reads the JSON language into these nodes; indexing/filter_match.py evaluates them on one document's metadata,
indexing/payload.py on a segment's rows).

The shape is Qdrant's. A filter is a boolean node:

    {"must": [cond, ...], "should": [cond, ...], "must_not": [cond, ...],
     "min_should": {"conditions": [cond, ...], "min_count": 2}}

`must`: every condition holds; `should`: at least one does (when the list is non-empty); `must_not`: none
does; `min_should`: at least `min_count` of its conditions do. A condition is a nested filter or one of

    {"key": "tenant", "match": {"value": "acme"}}             equality (keyword, integer, boolean)
    {"key": "tenant", "match": {"any": ["acme", "globex"]}}    any of
    {"key": "tenant", "match": {"except": ["acme"]}}           holds a value that is none of these
    {"key": "year", "range": {"gte": 2020, "lt": 2024}}        numbers, or ISO-8601 datetimes
    {"key": "tags", "values_count": {"gte": 2}}                how many values the field holds
    {"exists": {"key": "author"}}                              present and not null
    {"is_null": {"key": "author"}}                             present and null
    {"is_empty": {"key": "author"}}                            absent, null, or a list of no value
    {"has_id": ["doc-1", "doc-2"]}                             the document is one of these

A metadata value may be a list: a condition on it holds when it holds for one of its elements. Keys are
top-level metadata fields. Fields declared in the collection's schema (keyword, integer, float, boolean,
datetime) are checked by the parser, so that `{"year": {"match": {"value": "2020"}}}` on an integer field is an
error rather than a filter that silently matches nothing, and are indexed per segment (indexing/payload.py);
other fields are matched by a column built from the segments' stored metadata, unless the schema is strict.

`has_id` names documents by their ids; a segment knows its rows by document number (the doc store's rowid), so
the engine binds the ids to each shard's numbers (`bind_ids`) before the node reaches a segment.

Every fault is a FilterError naming the JSON path of the fault ("filter.must[0].range.gte").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

FieldType = Literal["keyword", "integer", "float", "boolean", "datetime"]
FIELD_TYPES: tuple[str, ...] = ("keyword", "integer", "float", "boolean", "datetime")
MAX_CONDITIONS = 256  # a filter's leaf conditions (match, range, values_count, exists, is_null, is_empty, has_id)
MAX_NESTED = 256  # a filter's nested filters (boolean nodes below the root), bounded apart: {"must": []} holds none
MAX_DEPTH = 8
MAX_ANY = 1024  # values of one any-of or except, ids of one has_id
MAX_IDS = 10_000  # ids in all a filter's has_id conditions: each is looked up in the doc stores on the request
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
    values: tuple[Any, ...]  # any of
    exclude: bool = False  # except: the field holds a value that is none of `values`
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
class ValuesCount:
    """How many values the field holds: a list's elements that are not null, 1 for a value, 0 absent or null."""

    key: str
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
class HasId:
    """The document is one of `ids`. `docs`: their document numbers in one shard, sorted (bind_ids); None until
    bound, and a segment refuses an unbound one."""

    ids: tuple[str, ...]
    docs: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Bool:
    must: tuple[Node, ...] = ()
    should: tuple[Node, ...] = ()
    must_not: tuple[Node, ...] = ()
    min_should: tuple[Node, ...] = ()
    min_count: int = 0  # at least this many of min_should hold (0: no min_should)


Node = Match | Range | ValuesCount | Exists | IsNull | HasId | Bool


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


def in_bounds(node: Range | ValuesCount, x: float) -> bool:
    """Whether x lies within the node's bounds."""
    return (
        (node.gt is None or x > node.gt)
        and (node.gte is None or x >= node.gte)
        and (node.lt is None or x < node.lt)
        and (node.lte is None or x <= node.lte)
    )


def _children(node: Bool) -> Iterator[Node]:
    yield from node.must
    yield from node.should
    yield from node.must_not
    yield from node.min_should


def named_ids(node: Node | None) -> set[str]:
    """Every id a has_id of the filter names (none: the filter needs no binding)."""
    if isinstance(node, HasId):
        return set(node.ids)
    if isinstance(node, Bool):
        return set().union(*map(named_ids, _children(node)))
    return set()


def bind_ids(node: Node | None, numbers: Mapping[str, int]) -> Node | None:
    """The filter with each has_id bound to the document numbers of its ids (`numbers`: id -> number, of the ids
    that exist where the node will be evaluated, one shard)."""
    return None if node is None else _bind(node, numbers)


def _bind(node: Node, numbers: Mapping[str, int]) -> Node:
    if isinstance(node, HasId):
        return replace(node, docs=tuple(sorted({numbers[i] for i in node.ids if i in numbers})))
    if isinstance(node, Bool):

        def each(part: tuple[Node, ...]) -> tuple[Node, ...]:
            return tuple(_bind(n, numbers) for n in part)

        return replace(
            node,
            must=each(node.must),
            should=each(node.should),
            must_not=each(node.must_not),
            min_should=each(node.min_should),
        )
    return node
