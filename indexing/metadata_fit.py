"""Whether metadata fits a collection's declared fields: one value (`value_fits`), and the documents of a write,
checked when the request comes (`first_misfit`, named by its place in the request) and again when its job runs
under the writer lock (`late_misfit`, named by document id), since a schema job may have declared a field between.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from indexing.filters import is_number, parse_datetime
from indexing.metadata_paths import flatten

_FLOAT_MAX = int(sys.float_info.max)


class SchemaMismatch(ValueError):
    """Metadata that does not fit the declared fields: the job fails and changes nothing."""


def value_fits(value: Any, kind: str) -> bool:
    """Whether a metadata value suits a declared field: a value of its type, a list of them, or null. A list may
    hold nulls among its values (`["a", null]`), as an undeclared field's may: they are no value, as a null is."""
    if value is None:
        return True
    items = [v for v in value if v is not None] if isinstance(value, list) else [value]
    if kind == "keyword":
        return all(isinstance(v, str) for v in items)
    if kind == "integer":
        return all(isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 for v in items)
    if kind == "float":  # an integer JSON allows but no float holds (10**400) is refused, not stored
        return all(is_number(v) and (not isinstance(v, int) or abs(v) <= _FLOAT_MAX) for v in items)
    if kind == "boolean":
        return all(isinstance(v, bool) for v in items)
    if kind == "datetime":
        return all(parse_datetime(v) is not None for v in items)
    return False


def misfit_field(fields: Mapping[str, str], metadata: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The first declared field whose value in `metadata` is not of its type, with that value; None when all fit.
    A declared field may be nested (`author.name`): its values are found by its path (indexing/metadata_paths.py)."""
    md = flatten(metadata) if any("." in key for key in fields) else metadata  # top-level fields need no view
    for key, kind in fields.items():
        if key in md and not value_fits(md[key], kind):
            return key, md[key]
    return None


def _misfit_at(fields: Mapping[str, str], documents: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """The first document holding a declared field's value not of its type, and what is wrong ("metadata.year:
    ..."); None when every one fits."""
    for i, d in enumerate(documents):
        found = misfit_field(fields, d.get("metadata") or {})
        if found is not None:
            key, value = found
            kind = fields[key]
            what = "integer (64-bit: -2**63 to 2**63 - 1)" if kind == "integer" else kind
            return i, f"metadata.{key}: the field is declared {what}; got {json.dumps(value)[:80]}"
    return None


def first_misfit(fields: Mapping[str, str], documents: Sequence[Mapping[str, Any]]) -> str | None:
    """A request's first misfit, by its place in the request ("documents[3].metadata.year: ..."), or None."""
    found = _misfit_at(fields, documents)
    return None if found is None else f"documents[{found[0]}].{found[1]}"


def late_misfit(schema: Mapping[str, Any], documents: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a write job must write nothing: checked when it was asked for, against the schema then, it runs after a
    schema job declared a field one of its values does not fit. Write jobs check this under the writer lock. The
    document is named by its id (the job's request is long answered)."""
    found = _misfit_at(schema.get("fields", {}), documents)
    if found is None:
        return None
    i, what = found
    doc_id = str(documents[i].get("id"))[:100]
    return f"document {doc_id!r}: {what} (declared after this write was asked for): nothing was written"
