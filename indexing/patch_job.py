"""A patch job: new metadata for stored documents, merged with what is stored when the job runs (or replacing
it), written without re-embedding."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from indexing.collection import Collection
from indexing.filters import Schema
from indexing.metadata_bounds import MetadataLimits, metadata_problem
from indexing.metadata_fit import SchemaMismatch, misfit_field
from indexing.prepare import content_hash


class MetadataOutOfBounds(ValueError):
    """The metadata a patch would store passes the server's metadata limits: the job fails and changes nothing."""


def patched(stored: dict[str, Any], metadata: dict[str, Any], unset: Iterable[str] = ()) -> dict[str, Any]:
    """A merge patch's result: `metadata`'s keys over the stored ones, then the `unset` keys removed."""
    gone = set(unset)
    return {k: v for k, v in {**stored, **metadata}.items() if k not in gone}


def run_patch(coll: Collection, payload: list[Any], limits: MetadataLimits) -> dict[str, int]:
    """New metadata ({"id", "metadata", "mode": "merge" | "replace", "unset"?} each), merged with what is stored now
    (a shallow update, less the `unset` keys) or replacing it. Run again, it finds nothing to change. Returns how
    many documents it changed, found already so, or found deleted since the patch was queued.

    The request was checked against the metadata stored then; patches queued before this one may have merged
    keys in since. So what would be stored is checked again, as the upsert's schema check is: out of bounds, the
    job fails with nothing written (a failed job, not a count in a succeeded one, since the document is left
    other than the client asked)."""
    fields = Schema.from_json(coll.settings.schema).fields
    items = []
    missing = 0
    for p in payload:
        doc = coll.document(p["id"], passages=False)
        if doc is None:
            missing += 1  # deleted since it was queued
            continue
        unset = p.get("unset", ())  # (jobs queued before unset existed have none)
        new = dict(p["metadata"]) if p["mode"] == "replace" else patched(doc.metadata, p["metadata"], unset)
        misfit = misfit_field(fields, new)  # declared since the request was checked (nested ones by their paths)
        if misfit is not None:
            key = misfit[0]
            raise SchemaMismatch(
                f"document {doc.doc_id!r}: metadata.{key} does not fit the field's declared type, {fields[key]}"
            )
        problem = metadata_problem(new, limits)
        if problem is not None:
            what = "merged with the metadata stored when the patch ran" if p["mode"] == "merge" else "given"
            raise MetadataOutOfBounds(
                f"document {doc.doc_id!r}: the metadata {what} is out of bounds ({problem}): nothing was written"
            )
        chash = content_hash({"title": doc.title, "text": doc.text, "metadata": new}, coll.settings.chunking)
        if chash != doc.content_hash:
            items.append((doc.doc_id, new, chash))
    if items:
        coll.rewrite_metadata(items)
    return {"patched": len(items), "unchanged": len(payload) - len(items) - missing, "not_found": missing}
