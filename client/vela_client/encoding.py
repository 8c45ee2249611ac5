"""JSON as the client sends it: every request body, every batch of `index_in_batches` and the filter of a scroll
go through `dumps`, so that the sync and async clients encode alike.

Beyond what `json` takes, a `datetime` is sent as ISO-8601 / RFC 3339 text (`2025-03-01T12:00:00+00:00`; a naive
one as it is, `2025-03-01T12:00:00`, which the server reads as UTC) and a `date` as `YYYY-MM-DD`: the forms the
server's datetime fields and range filters read. NaN and infinities are refused (JSON has no form for them).
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any


def _default(value: Any) -> Any:
    if isinstance(value, date):  # a datetime is a date too
        return value.isoformat()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> str:
    """`value` as compact JSON text (non-ASCII kept as it is); TypeError for a value JSON has no form for, ValueError
    for NaN or an infinity."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default)


def encode(value: Any) -> bytes:
    """`dumps`, as the UTF-8 bytes of a request body."""
    return dumps(value).encode("utf-8")
