"""Hits grouped by a metadata field (`group_by`): at most `size` hits per value of the field, as Qdrant's search
groups, Elasticsearch's collapse and Meilisearch's distinct attribute keep a result list from being one source
(one site, one author, one product) over and over.

The groups are drawn from the best `depth` documents of the fused (and reranked) list: the engine ranks that
many, the hits are walked best first, and a hit is kept while each of its values has room. A document whose field
holds a list belongs to the group of each of its values (so it is left out once one of them is full); one without
the field (absent, null, an object) is a group of its own. A nested field is named by its dotted path
(indexing/metadata_paths.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from indexing.filters import typed_key
from indexing.metadata_paths import flatten, path_key

MAX_DEPTH = 1000  # documents the groups of one query may be drawn from, by default (service/search_requests.py)


@dataclass(frozen=True)
class GroupSpec:
    key: str
    size: int = 1
    depth: int | None = None  # None: depth_for's default

    def depth_for(self, end: int) -> int:
        """The documents ranked for a page ending at `end` (offset + k): the request's depth, or ten documents per
        hit asked for (at least 100), at most MAX_DEPTH; never fewer than the page."""
        wanted = self.depth if self.depth is not None else min(MAX_DEPTH, max(100, 10 * end))
        return max(wanted, end)


class HasMetadata(Protocol):
    @property
    def metadata(self) -> dict[str, Any]: ...


def group_values(metadata: dict[str, Any], key: str) -> set[tuple[str, Any]]:
    """The values a document is grouped by (as a filter's `match` compares them: 1 and 1.0 alike, true apart)."""
    key = path_key(key)
    value = metadata.get(key) if "." not in key else flatten(metadata).get(key)  # a dotted path alone needs the view
    items = value if isinstance(value, list) else [value]
    return {k for k in (typed_key(v) for v in items if v is not None) if k is not None}


H = TypeVar("H", bound=HasMetadata)


def grouped(hits: Sequence[H], spec: GroupSpec, end: int) -> list[H]:
    """The best `spec.depth_for(end)` of `hits` in their order, each kept while every one of its values holds fewer
    than `spec.size` kept hits, so that no value's group passes `size` (`end`: offset + k of the page asked for)."""
    held: dict[tuple[str, Any], int] = {}
    out: list[H] = []
    for h in hits[: spec.depth_for(end)]:  # the engine ranks a few more, for documents deleted meanwhile
        values = group_values(h.metadata, spec.key)
        if any(held.get(v, 0) >= spec.size for v in values):
            continue
        for v in values:
            held[v] = held.get(v, 0) + 1
        out.append(h)
    return out
