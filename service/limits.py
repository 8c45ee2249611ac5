"""Per-request bounds that depend on settings (the schemas hold the fixed ones): document metadata at ingest, and
the work and response size of one search request. Each refusal names the limit and what to change."""

from __future__ import annotations

import json
import math
from typing import Any

from service.errors import ApiError
from service.settings import Settings


def _shape(metadata: dict[str, Any]) -> tuple[int, int]:
    """Depth (the object itself is level 1) and keys at all levels, without recursion: the body parser allows
    nesting far deeper than the Python stack would."""
    depth, keys = 0, 0
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            depth, keys = max(depth, level), keys + len(value)
            stack.extend((v, level + 1) for v in value.values())
        elif isinstance(value, list):
            depth = max(depth, level)
            stack.extend((v, level + 1) for v in value)
    return depth, keys


def metadata_problem(metadata: dict[str, Any] | None, settings: Settings) -> str | None:
    """Why this metadata cannot be stored, or None. Stored metadata comes back with every hit, so it must stay
    small and serialisable."""
    if not metadata:
        return None
    depth, keys = _shape(metadata)
    if depth > settings.max_metadata_depth:
        return f"metadata is nested {depth} levels deep; the limit is {settings.max_metadata_depth}"
    if keys > settings.max_metadata_keys:
        return f"metadata has {keys} keys; the limit is {settings.max_metadata_keys}"
    try:
        size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode())
    except ValueError:
        return "metadata must not contain NaN or Infinity"
    if size > settings.max_metadata_bytes:
        return f"metadata is {size} bytes as JSON; the limit is {settings.max_metadata_bytes}"
    return None


def check_metadata(documents: list[Any], settings: Settings) -> None:
    """422 for the first document whose metadata is out of bounds (nothing of the request is written)."""
    for i, doc in enumerate(documents):
        problem = metadata_problem(doc.metadata, settings)
        if problem is not None:
            raise ApiError(422, "invalid_request", f"documents.{i}.metadata ({doc.id!r}): {problem}")


def check_search_work(settings: Settings, *, queries: list[str], k: int, depth: int) -> None:
    """Bounds the work of one request before any is done: hits to return, list depth to fuse, query text."""
    n = len(queries)
    if n > settings.max_batch_queries:
        raise ApiError(
            413, "payload_too_large", f"{n} queries in one request; the limit is {settings.max_batch_queries}"
        )
    if k * n > settings.max_search_hits:
        raise ApiError(
            413,
            "payload_too_large",
            f"k x queries is {k * n}; the limit is {settings.max_search_hits} (VELA_MAX_SEARCH_HITS): "
            "lower k or split the batch",
        )
    if depth * n > settings.max_search_depth:
        raise ApiError(
            413,
            "payload_too_large",
            f"depth x queries is {depth * n}; the limit is {settings.max_search_depth} (VELA_MAX_SEARCH_DEPTH): "
            "lower depth or split the batch",
        )
    chars = sum(len(q) for q in queries)
    if chars > settings.max_query_chars:
        raise ApiError(
            413,
            "payload_too_large",
            f"the queries have {chars} characters; the limit is {settings.max_query_chars} (VELA_MAX_QUERY_CHARS): "
            "split the batch",
        )


def check_response_size(settings: Settings, size: int) -> None:
    if size > settings.max_response_bytes:
        raise ApiError(
            413,
            "payload_too_large",
            f"the response would be {size} bytes; the limit is {settings.max_response_bytes} "
            "(VELA_MAX_RESPONSE_BYTES): lower k or split the batch",
        )


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON the way a response body writes it (UTF-8, nothing ASCII-escaped; strings
    escaped alike). Floats are written as Python writes them, never shorter than the body's text (1e-07 for 1e-7):
    for JSON-safe values this is the exact size, or an upper bound by a byte per such float."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return len(text.encode("utf-8", "surrogatepass"))


def float_size(value: float | None) -> int:
    """Bytes of a float field in a response body: null for None and non-finite values (see json_size)."""
    return len(repr(float(value))) if value is not None and math.isfinite(value) else 4
