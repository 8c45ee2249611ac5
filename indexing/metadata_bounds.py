"""Bounds of one document's stored metadata (VELA_MAX_METADATA_DEPTH, _KEYS, _VALUES, _BYTES). The API checks a
request against them before it queues anything; a patch job checks again what it would store, since patches
queued before it may have grown the metadata it merges with. Here, not in service/, so that a `vela worker`
process (which reads IndexingSettings) checks against the same values."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MetadataLimits:
    """The defaults are the settings' defaults (indexing/settings.py)."""

    depth: int = 32
    keys: int = 1_000
    values: int = 4_096
    bytes: int = 65_536


def _shape(metadata: dict[str, Any]) -> tuple[int, int, int]:
    """Depth (the object itself is level 1), keys and values (everything that is not an object or a list: each
    element of a list counts) at all levels, without recursion: the body parser allows nesting far deeper than
    the Python stack would."""
    depth, keys, values = 0, 0, 0
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            depth, keys = max(depth, level), keys + len(value)
            stack.extend((v, level + 1) for v in value.values())
        elif isinstance(value, list):
            depth = max(depth, level)
            stack.extend((v, level + 1) for v in value)
        else:
            values += 1
    return depth, keys, values


def metadata_problem(metadata: dict[str, Any] | None, limits: MetadataLimits) -> str | None:
    """Why this metadata cannot be stored, or None. Stored metadata comes back with every hit, so it must stay
    small and serialisable."""
    if not metadata:
        return None
    depth, keys, values = _shape(metadata)
    if depth > limits.depth:
        return f"metadata is nested {depth} levels deep; the limit is {limits.depth}"
    if keys > limits.keys:
        return f"metadata has {keys} keys; the limit is {limits.keys}"
    if values > limits.values:
        return (
            f"metadata has {values} values (each element of a list counts); the limit is "
            f"{limits.values} (VELA_MAX_METADATA_VALUES)"
        )
    try:
        size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode())
    except ValueError:
        return "metadata must not contain NaN or Infinity"
    if size > limits.bytes:
        return f"metadata is {size} bytes as JSON; the limit is {limits.bytes}"
    return None
