"""The scroll's query parameters, parsed: `filter` (JSON text, ANDed with a scoped token's pin) and
`order_by`/`direction`; 422 in the documented error shape for what they cannot be."""

from __future__ import annotations

import json

from indexing.collection import Collection
from indexing.docstore_order import OrderByError, Ordering, check_order_field
from indexing.filters import Node, Schema
from indexing.metadata_paths import path_key
from service.access import read_filter
from service.access_tokens import Access
from service.errors import ApiError
from service.schemas import lone_surrogate_at


def query_filter(raw: str | None, coll: Collection, access: Access, name: str) -> Node | None:
    """The `filter` query parameter: JSON text of a filter, parsed against the collection's schema (and ANDed with
    a scoped token's pinned filter)."""
    if raw is None or not raw.strip():
        return read_filter(access, name, None, coll.settings.schema)
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ApiError(422, "invalid_filter", f"filter: not valid JSON ({str(exc)[:120]})") from exc
    where = lone_surrogate_at(parsed)  # as a body's filter is refused (schemas.UnicodeBody)
    if where is not None:
        at = f"filter.{where}" if where else "filter"
        raise ApiError(422, "invalid_filter", f"{at}: not Unicode text (a lone UTF-16 surrogate, such as \\udc00)")
    return read_filter(access, name, parsed, coll.settings.schema)


def scroll_ordering(coll: Collection, order_by: str | None, direction: str | None) -> Ordering | None:
    """The order a scroll asks for: None (id order), or a declared field's; 422 otherwise."""
    if order_by is None:
        if direction is not None:  # an option that could not change the answer is refused, not ignored
            raise ApiError(422, "invalid_request", "direction: orders a scroll by order_by; without it, ids ascend")
        return None
    try:
        kind = check_order_field(order_by, Schema.from_json(coll.settings.schema).fields)
    except OrderByError as exc:
        raise ApiError(422, "invalid_order_by", str(exc)) from exc
    return Ordering(path_key(order_by), kind, direction == "desc")
