"""Facet counts: how many documents hold each value of a declared field, among those that pass a filter.

A document counts once per distinct value it holds (a list value counts under each of its items), whatever
number of passages it has. Only declared keyword, integer and boolean fields can be faceted: their typed
columns (indexing/payload.py) are built when a manifest is loaded, so a facet request is numpy work over
those columns and never a scan of stored metadata. The shards' counts add up, since a document lives in
one shard; the engine merges them and keeps the top values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexing.live_segment import LiveSegment

FACET_KINDS = ("keyword", "integer", "boolean")


class FacetError(ValueError):
    """The field cannot be faceted: not declared, or of a type without discrete values."""


@dataclass(frozen=True)
class FacetCount:
    value: str | int | bool
    count: int


def check_facet_field(key: str, fields: Mapping[str, str]) -> str:
    """The declared type of `key`, which facets accept; FacetError says why not otherwise."""
    kind = fields.get(key)
    if kind is None:
        raise FacetError(
            f"field {key!r} is not declared: facets count declared keyword, integer or boolean fields "
            "(declare it with PUT /collections/{name}/schema)"
        )
    if kind not in FACET_KINDS:
        raise FacetError(f"field {key!r} is declared {kind}: facets count keyword, integer or boolean fields")
    return kind


def shard_counts(parts: Sequence[LiveSegment], key: str, kind: str) -> dict[Any, int]:
    """value -> documents of these segments' live rows (already narrowed by the filter) that hold it."""
    docs: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    names: dict[str, int] = {}  # keyword -> a code shared by this shard's segments
    for p in parts:
        col = p.seg.payload.columns.get((key, kind))
        if col is None:  # a manifest published before the field was declared: built once, then kept
            p.seg.payload.index({key: kind})
            col = p.seg.payload.columns[(key, kind)]
        if not col.row_of.size:
            continue
        keep = p.live[col.row_of]  # (m,) the column's entries on live, passing rows
        rows, values = col.row_of[keep], col.values[keep]
        if kind == "keyword":  # segment codes -> shard codes, for the values that occur only
            seen, inverse = np.unique(values, return_inverse=True)
            shared = np.fromiter((names.setdefault(col.labels[c], len(names)) for c in seen), np.int64, len(seen))
            values = shared[inverse]
        docs.append(p.seg.docs[rows])
        codes.append(values.astype(np.int64))
    if not docs:
        return {}
    # (document, value) pairs once each: a document's rows repeat its metadata, one row per passage
    pairs = np.unique(np.stack([np.concatenate(docs), np.concatenate(codes)], axis=1), axis=0)
    values, counts = np.unique(pairs[:, 1], return_counts=True)
    labels: Sequence[Any] = list(names) if kind == "keyword" else []
    out: dict[Any, int] = {}
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        out[labels[v] if kind == "keyword" else bool(v) if kind == "boolean" else v] = c
    return out


def top_values(per_shard: Iterable[Mapping[Any, int]], limit: int) -> tuple[list[FacetCount], int]:
    """The shards' counts summed; the `limit` most frequent values (ties by value, ascending) and how many
    distinct values there are."""
    total: dict[Any, int] = {}
    for counts in per_shard:
        for v, c in counts.items():
            total[v] = total.get(v, 0) + c
    ranked = sorted(total.items(), key=lambda vc: (-vc[1], vc[0]))[:limit]
    return [FacetCount(v, c) for v, c in ranked], len(total)
