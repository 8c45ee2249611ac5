"""Nested metadata as filters, facets and declared fields see it: every value inside an object is also held under its
dotted path, so that `{"key": "author.name", ...}` reaches `{"author": {"name": "Ada"}}`.

The rules are those of Qdrant's nested keys and of Elasticsearch's object fields:
- an object's fields are named by their path: `{"a": {"b": 1}}` holds `a.b` = 1 (and `a`, the object itself);
- a list of objects holds each object's values under one path, flattened: `{"a": [{"b": 1}, {"b": [2, 3]}]}`
  holds `a.b` = [1, 2, 3] (Qdrant writes that path `a[].b`; filters take both spellings, see `path_key`);
- a key that itself holds a dot (`{"a.b": 4}`) is the same path: its values and the nested ones count together.

The flat view is made once per distinct metadata when a segment is loaded (indexing/payload.py) or a document is
checked against a filter; metadata without objects is returned as it is, at the cost of one look at its values.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

MAX_PATH = 256  # characters of a filter's key, a declared field's name, a group_by key


def _nested(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(x, dict) for x in value))


def _walk(value: Any, prefix: str, found: dict[str, list[Any]]) -> None:
    """Collect, under each dotted path below `prefix`, the values found there (one per object that holds it). A
    path longer than a filter's key can be (MAX_PATH) is left out, with everything below it: no request could
    name it, and the paths of long keys nested deep would otherwise cost the square of their length in memory."""
    if isinstance(value, dict):
        for k, v in value.items():
            if len(prefix) + 1 + len(k) > MAX_PATH:
                continue
            path = sys.intern(f"{prefix}.{k}")  # documents of one shape share their paths' strings
            found.setdefault(path, []).append(v)
            if _nested(v):
                _walk(v, path, found)
    else:  # a list: its objects, each under the same path (its scalars belong to the list's own path)
        for x in value:
            if isinstance(x, dict):
                _walk(x, prefix, found)


def _joined(values: list[Any]) -> Any:
    """One path's values as one metadata value: the value itself when one object held it, else one flat list."""
    if len(values) == 1:
        return values[0]
    out: list[Any] = []
    for v in values:
        out.extend(v if isinstance(v, list) else [v])
    return out


def flatten(metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    """`metadata` with every nested value also under its dotted path; `metadata` itself when nothing is nested."""
    if not any(_nested(v) for v in metadata.values()):
        return metadata
    found: dict[str, list[Any]] = {}
    for k, v in metadata.items():
        if _nested(v):
            _walk(v, k, found)
    out = dict(metadata)
    for path, values in found.items():
        out[path] = _joined([metadata[path], *values] if path in metadata else values)
    return out


def path_key(key: str) -> str:
    """A filter's field name with Qdrant's array marks taken out: `a[].b` is `a.b`, `tags[]` is `tags`."""
    return key.replace("[]", "") if "[]" in key else key


_LEAF: dict[str, Any] = {}  # in a projection's tree: keep the whole value here


def project(metadata: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The metadata cut to `keys`, nested ones kept in their place: `("author.name",)` keeps `{"author": {"name":
    ...}}` (of every object, through a list of them), as Qdrant's `with_payload` does. A key the metadata holds as it
    is (`a.b` at the top level) is kept as it is, and a path through it too (`a.b.c` in `{"a.b": {"c": 1}}`), as
    filters read both."""
    trees: dict[str, dict[str, Any]] = {}  # top-level key -> the tree of what to keep below it
    out: dict[str, Any] = {}
    for key in keys:
        if key in metadata:
            out[key] = metadata[key]
        parts = path_key(key).split(".")
        for i in range(1, len(parts)):
            top = ".".join(parts[:i])
            if top in metadata:
                _keep(trees.setdefault(top, {}), parts[i:])
    for top, tree in trees.items():
        if top not in out:  # asked for whole as well
            kept = _cut(metadata[top], tree)
            if kept is not _MISSING:
                out[top] = kept
    return out


def _keep(tree: dict[str, Any], rest: list[str]) -> None:
    """Mark the path `rest` in `tree` as kept whole (a shorter path kept whole keeps everything below it)."""
    node = tree
    for part in rest[:-1]:
        if node.get(part) is _LEAF:
            return
        node = node.setdefault(part, {})
    node[rest[-1]] = _LEAF


_MISSING = object()


def _cut(value: Any, tree: dict[str, Any]) -> Any:
    if tree is _LEAF:
        return value
    if isinstance(value, dict):
        kept = {k: _cut(value[k], sub) for k, sub in tree.items() if k in value}
        kept = {k: v for k, v in kept.items() if v is not _MISSING}
        return kept if kept else _MISSING
    if isinstance(value, list):
        items = [_cut(x, tree) for x in value if isinstance(x, dict)]
        items = [x for x in items if x is not _MISSING]
        return items if items else _MISSING
    return _MISSING
