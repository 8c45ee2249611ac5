"""A writing process for the crash tests: rounds of upserts, deletes, commits and merges on one collection.

    python -m tests.indexing.crash_writer DATA_DIR SHARDS ROUNDS

Deterministic: round r writes the same documents every time, so a run killed anywhere and then run again
converges to one final state. Prints "ready" once its imports are done, so a killer times from there."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from indexing.collection import CollectionSettings
from indexing.dense import DenseIndexParams
from indexing.docstore import StoredDocument
from indexing.merge_policy import TieredMergePolicy
from indexing.shards import ShardedCollection
from indexing.store import CollectionStore

DIM = 32
WORDS = [
    "tide",
    "moon",
    "gravity",
    "sugar",
    "insulin",
    "magma",
    "crust",
    "carbon",
    "sheet",
    "court",
    "appeal",
    "study",
    "enzyme",
]
MERGE = TieredMergePolicy(merge_factor=2, floor_rows=1, max_segments=2)


def documents(r: int) -> list[StoredDocument]:
    """Round r: 40 new documents, and 10 rewrites of older ones (new passages replace theirs)."""
    rng = np.random.default_rng(r)
    ids = [f"d{r}-{i}" for i in range(40)] + [f"d{max(r - 1, 0)}-{i}" for i in range(10)]
    out = []
    for doc_id in ids:
        text = " ".join(rng.choice(WORDS, size=30))
        spans = [(0, len(text) // 2), (len(text) // 2, len(text))]
        emb = rng.standard_normal((2, DIM)).astype(np.float32)
        out.append(StoredDocument(doc_id, "", text, {}, str(r), spans, emb / np.linalg.norm(emb, axis=1)[:, None]))
    return out


def main(data: Path, shards: int, rounds: int) -> None:
    store = CollectionStore(data)
    settings = CollectionSettings(
        name="c", embedder="none", dim=DIM, small_dim=16, shards=shards, dense_index=DenseIndexParams(kind="flat")
    )
    coll = store.get("c") if store.exists("c") else store.create(settings)
    print("ready", flush=True)
    for r in range(rounds):
        with coll.writer():
            docs = documents(r)
            if isinstance(coll, ShardedCollection):
                coll.upsert(docs)
            else:
                coll.docstore.upsert(docs)
            for shard in coll.shard_list:
                shard.docstore.delete([f"d{max(r - 2, 0)}-{i}" for i in range(35, 40)])
            coll.commit()
        coll.merge(MERGE)
        with coll.writer():
            coll._publish_set()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
