"""Whether one document's metadata passes a parsed filter (indexing/filters.py): the scans of stored metadata
(fields no payload index covers, the document scroll, delete by filter) run this."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from indexing.filters import Bool, Exists, IsNull, Match, Node, Range, is_number, parse_datetime, typed_key


def _scalars(value: Any) -> list[Any]:
    return [v for v in value if v is not None] if isinstance(value, list) else ([] if value is None else [value])


def _in_range(r: Range, x: float) -> bool:
    return (
        (r.gt is None or x > r.gt)
        and (r.gte is None or x >= r.gte)
        and (r.lt is None or x < r.lt)
        and (r.lte is None or x <= r.lte)
    )


def _range_value(v: Any, dated: bool) -> float | None:
    if dated:
        return parse_datetime(v)
    return v if is_number(v) else None


def matches(node: Node, metadata: Mapping[str, Any]) -> bool:
    """Whether one document's metadata passes the filter."""
    if isinstance(node, Bool):
        return (
            all(matches(n, metadata) for n in node.must)
            and (not node.should or any(matches(n, metadata) for n in node.should))
            and not any(matches(n, metadata) for n in node.must_not)
        )
    if isinstance(node, Exists):
        return bool(_scalars(metadata.get(node.key)))
    if isinstance(node, IsNull):
        return node.key in metadata and metadata[node.key] is None
    values = _scalars(metadata.get(node.key))
    if isinstance(node, Match):
        return any(typed_key(v) in node.typed for v in values)
    for v in values:
        x = _range_value(v, node.dated)
        if x is not None and _in_range(node, x):
            return True
    return False
