"""A scroll's opaque cursors (no HTTP here): the position after which the next page starts, as url-safe base64.

A scroll in id order names the last id (`v1`); an ordered scroll (`order_by`) names the last (value, id) and the
ordering it was made for (`o1`: field, direction, the field's type), so that a cursor is never read under another
order, where its position would mean nothing. Like Qdrant's scroll `offset` and Elasticsearch's `search_after`, a
cursor holds no server state: it is a position, and one edited by hand is read as the position it spells.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from indexing.docstore_order import Key, Ordering, Position

_CURSOR_PREFIX = "v1\n"
_ORDERED_PREFIX = "o1\n"
_NOT_OURS = "cursor: not a cursor this API returned (pass next_cursor as it is)"

ScrollPosition = str | Position  # the last id, or the last (value, id) of an ordered scroll


class BadCursor(ValueError):
    pass


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode(cursor: str) -> str:
    try:
        return base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise BadCursor(_NOT_OURS) from exc


def encode_cursor(after: str) -> str:
    """The opaque cursor of a scroll position: the last document id visited (url-safe base64, no padding)."""
    return _encode(_CURSOR_PREFIX + after)


def decode_cursor(cursor: str) -> str:
    raw = _decode(cursor)
    if not raw.startswith(_CURSOR_PREFIX):
        raise BadCursor(_NOT_OURS)
    return raw[len(_CURSOR_PREFIX) :]


def _spelled(ordering: Ordering | None) -> str:
    if ordering is None:
        return "the scroll in id order (no order_by)"
    return f"order_by={ordering.field!r} direction={'desc' if ordering.descending else 'asc'}"


def scroll_cursor(after: ScrollPosition, ordering: Ordering | None) -> str:
    """The cursor of a position of a scroll in id order (`ordering` None) or of an ordered one."""
    if isinstance(after, str):
        return encode_cursor(after)
    if ordering is None:
        raise TypeError("an ordered scroll's position without its ordering")
    direction = "desc" if ordering.descending else "asc"
    fields = [ordering.field, direction, ordering.kind, after[0], after[1]]
    return _encode(_ORDERED_PREFIX + json.dumps(fields, ensure_ascii=False, separators=(",", ":")))


def scroll_position(cursor: str, ordering: Ordering | None) -> ScrollPosition:
    """The position a cursor names, for a scroll in this ordering (None: id order). BadCursor when it does not
    decode, or was made for another order_by, direction or type of the field (declared again since)."""
    raw = _decode(cursor)
    if raw.startswith(_CURSOR_PREFIX):
        if ordering is not None:
            raise BadCursor(f"cursor: made for {_spelled(None)}, not for {_spelled(ordering)}")
        return raw[len(_CURSOR_PREFIX) :]
    if not raw.startswith(_ORDERED_PREFIX):
        raise BadCursor(_NOT_OURS)
    try:
        field, direction, kind, value, doc_id = json.loads(raw[len(_ORDERED_PREFIX) :])
    except (ValueError, TypeError, RecursionError) as exc:  # RecursionError: "[[[[..." made by hand
        raise BadCursor(_NOT_OURS) from exc
    if direction not in ("asc", "desc") or not all(isinstance(x, str) for x in (field, kind, doc_id)):
        raise BadCursor(_NOT_OURS)
    if any(not _unicode(x) for x in (field, kind, doc_id, value) if isinstance(x, str)):
        raise BadCursor(_NOT_OURS)  # "\ud800" spelled in a hand-made cursor: no stored text holds one
    made = Ordering(field, kind, direction == "desc")
    if ordering is None or (made.field, made.descending) != (ordering.field, ordering.descending):
        raise BadCursor(f"cursor: made for {_spelled(made)}, not for {_spelled(ordering)}")
    if made.kind != ordering.kind:
        raise BadCursor(
            f"cursor: made while field {ordering.field!r} was declared {made.kind}; it is {ordering.kind} now: "
            "start the scroll again"
        )
    return _key(value, ordering.kind), doc_id


def _unicode(text: str) -> bool:
    """Whether `text` is Unicode text: JSON's \\uXXXX escapes can spell a lone UTF-16 surrogate, which no id or
    stored value holds and SQLite cannot take."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _key(value: Any, kind: str) -> Key | None:
    """A cursor's value, of the type the field's sort keys have (indexing/docstore_order.sort_key)."""
    if value is None:
        return None
    if kind == "keyword" and isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or kind == "keyword":
        raise BadCursor(_NOT_OURS)
    if kind == "float":
        try:
            x = float(value)
        except OverflowError as exc:
            raise BadCursor(_NOT_OURS) from exc
        if math.isnan(x):  # json reads NaN; no key is one
            raise BadCursor(_NOT_OURS)
        return x
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value  # integer, boolean (0 or 1) and datetime (epoch microseconds) keys are 64-bit integers
    raise BadCursor(_NOT_OURS)
