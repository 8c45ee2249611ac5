"""Whether a document's metadata passes a parsed filter (indexing/filters.py). `matches` answers for one document;
the scans of stored metadata (the document scroll, delete by filter) answer for many at a time with `each_matches`,
which is numpy work over the documents' values (indexing/payload.py), not a Python loop over every element of
every list per condition, and gives the same answers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from indexing.filters import Bool, Exists, IsNull, Match, Node, Range, is_number, parse_datetime, typed_key
from indexing.payload import Payload


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


def each_matches(node: Node, metadata: Sequence[dict[str, Any]]) -> list[bool]:
    """`matches` of each document (it stops at the request's deadline, indexing/deadline.py)."""
    return Payload(list(metadata)).mask(node, {}).tolist()  # type: ignore[no-any-return]


def matching_ids(node: Node, rows: Iterable[tuple[str, str]], chunk: int = 1000) -> Iterator[str]:
    """The ids of the (id, metadata JSON) rows whose metadata passes, `chunk` rows at a time."""
    batch: list[tuple[str, str]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == chunk:
            yield from _passing(node, batch)
            batch = []
    yield from _passing(node, batch)


def _passing(node: Node, batch: list[tuple[str, str]]) -> list[str]:
    ok = each_matches(node, [json.loads(text) for _, text in batch]) if batch else []
    return [doc_id for (doc_id, _), passes in zip(batch, ok, strict=True) if passes]
