"""What `GET /collections/{name}` reports of a collection: counts, dimensions and the published index's facts."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Protocol

from indexing.collection_settings import CollectionSettings
from indexing.manifest import current_manifest


class Stated(Protocol):
    """What the report reads of a collection (indexing/collection.py's Collection, sharded or not)."""

    name: str
    settings: CollectionSettings

    @property
    def shard_list(self) -> list[Any]: ...
    def published_versions(self) -> list[int]: ...
    def published_set_generation(self) -> int: ...


def collection_stats(coll: Stated) -> dict[str, Any]:
    """Counts, dimensions, the published index (version, segments, bytes, dense kind) and the settings shown."""
    docs = passages = 0
    for shard in coll.shard_list:
        d, p = shard.docstore.counts()
        docs, passages = docs + d, passages + p
    versions = coll.published_versions()
    manifests = [current_manifest(s.segments_dir) or {"segments": []} for s in coll.shard_list]
    segs = [e for m in manifests for e in m["segments"]]
    sizes = [
        sum(f.stat().st_size for f in (s.segments_dir / e["name"]).rglob("*") if f.is_file())
        for s, m in zip(coll.shard_list, manifests, strict=True)
        for e in m["segments"]
    ]
    kinds = sorted(
        {
            json.loads((s.segments_dir / e["name"] / "segment.json").read_text())["dense"]["kind"]
            for s, m in zip(coll.shard_list, manifests, strict=True)
            for e in m["segments"]
        }
    )
    out = {
        "name": coll.name,
        "documents": docs,
        "passages": passages,
        "embedder": coll.settings.embedder,
        "dims": {"full": coll.settings.dim, "small": min(coll.settings.small_dim, coll.settings.dim)},
        "index": {
            "version": versions[0] if len(versions) == 1 else int(coll.published_set_generation()),
            "passages": sum(int(e["rows"]) - int(e["dead"]) for e in segs),
            "bytes": sum(sizes),
            "segments": len(segs),
            "deleted_rows": sum(int(e["dead"]) for e in segs),
            "bm25": coll.settings.bm25.to_json(),
            # What was built ("flat" or "hnsw", per segment) and the settings that chose it.
            "dense": {
                # one kind as a string ("none" before anything is built), a list only when segments differ
                "kind": kinds[0] if len(kinds) == 1 else (kinds or "none"),
                "settings": coll.settings.dense_index.to_json(),
            },
        },
        "chunking": asdict(coll.settings.chunking),
        "created_at": coll.settings.created_at,
        "schema": coll.settings.schema,
        "fusion": coll.settings.fusion,
    }
    return out
