"""Whether a document's metadata passes a parsed filter (indexing/filters.py). `matches` answers for one document;
the scans of stored metadata (the document scroll, delete by filter) answer for many at a time with `each_matches`,
which is numpy work over the documents' values (indexing/payload.py), not a Python loop over every element of
every list per condition, and gives the same answers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from indexing.filters import (
    Bool,
    Exists,
    HasId,
    IsNull,
    Match,
    Node,
    ValuesCount,
    bind_ids,
    in_bounds,
    is_number,
    named_ids,
    parse_datetime,
    typed_key,
)
from indexing.metadata_paths import flatten
from indexing.payload import Payload


def _scalars(value: Any) -> list[Any]:
    return [v for v in value if v is not None] if isinstance(value, list) else ([] if value is None else [value])


def values_count(value: Any) -> int:
    """How many values a metadata value holds: a list's elements that are not null, 1 for a value, 0 for null."""
    if isinstance(value, list):
        return sum(v is not None for v in value)
    return 0 if value is None else 1


def _range_value(v: Any, dated: bool) -> float | None:
    if dated:
        return parse_datetime(v)
    return v if is_number(v) else None


def matches(node: Node, metadata: Mapping[str, Any], doc_id: str | None = None) -> bool:
    """Whether one document (its metadata, and its id for a has_id) passes the filter."""
    return _matches(node, flatten(metadata), doc_id)


def _matches(node: Node, metadata: Mapping[str, Any], doc_id: str | None) -> bool:
    """`matches` over metadata flattened already (nested values under their dotted paths too)."""
    if isinstance(node, Bool):
        return (
            all(_matches(n, metadata, doc_id) for n in node.must)
            and (not node.should or any(_matches(n, metadata, doc_id) for n in node.should))
            and not any(_matches(n, metadata, doc_id) for n in node.must_not)
            and sum(_matches(n, metadata, doc_id) for n in node.min_should) >= node.min_count
        )
    if isinstance(node, HasId):
        return doc_id in node.ids
    if isinstance(node, ValuesCount):
        return in_bounds(node, values_count(metadata.get(node.key)))
    if isinstance(node, Exists):
        return bool(_scalars(metadata.get(node.key)))
    if isinstance(node, IsNull):
        return node.key in metadata and metadata[node.key] is None
    values = _scalars(metadata.get(node.key))
    if isinstance(node, Match):
        keys = [typed_key(v) for v in values]
        if node.exclude:  # a value (not a list or an object) that is none of the node's
            return any(k is not None and k not in node.typed for k in keys)
        return any(k in node.typed for k in keys)
    for v in values:
        x = _range_value(v, node.dated)
        if x is not None and in_bounds(node, x):
            return True
    return False


def each_matches(node: Node, metadata: Sequence[dict[str, Any]], ids: Sequence[str] | None = None) -> list[bool]:
    """`matches` of each document, with its id where the filter names some (it stops at the request's deadline,
    indexing/deadline.py). The ids are numbered here, and the filter's has_id bound to those numbers, as a shard's
    are to its doc store's."""
    numbers: dict[str, int] = {}
    docs = np.asarray([numbers.setdefault(i, len(numbers)) for i in ids or ()], np.int64)
    if named_ids(node):
        node = bind_ids(node, numbers) or node
    return Payload(list(metadata)).mask(node, {}, docs if ids is not None else None).tolist()  # type: ignore[no-any-return]


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
    ok = each_matches(node, [json.loads(text) for _, text in batch], [doc_id for doc_id, _ in batch]) if batch else []
    return [doc_id for (doc_id, _), passes in zip(batch, ok, strict=True) if passes]
