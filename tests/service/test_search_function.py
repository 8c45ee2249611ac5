"""search_batch without HTTP: documents deleted after the index was published never show up."""

from __future__ import annotations

from pathlib import Path

from indexing.bm25 import BM25Params
from indexing.chunking import ChunkingParams
from indexing.collection import CollectionSettings
from indexing.prepare import prepare_documents
from indexing.store import CollectionStore
from models import EmbedderCache
from service.search import search_batch


def test_a_document_deleted_since_the_last_commit_is_replaced_by_the_next_one(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    embedder = EmbedderCache().get(tiny_embedder_dir)
    store = CollectionStore(tmp_path)
    coll = store.create(
        CollectionSettings(
            name="c", embedder=str(tiny_embedder_dir), dim=embedder.dim, chunking=ChunkingParams(), bm25=BM25Params()
        )
    )
    docs = [{"id": f"d{i}", "text": f"shared words and marker{i}"} for i in range(6)]
    coll.docstore.upsert(prepare_documents(docs, coll, embedder))
    coll.commit()
    for mode in ("bm25", "dense", "hybrid"):
        before = search_batch(collection=coll, embedder=embedder, queries=["shared words"], k=3, mode=mode)
        assert len(before[0].hits) == 3
        gone = before[0].hits[0].id
        # Not committed: the published segments still hold it. Hydration drops it, and the few spare hits
        # the search fetches for this window fill its place.
        coll.docstore.delete([gone])
        after = search_batch(collection=coll, embedder=embedder, queries=["shared words"], k=3, mode=mode)
        ids = [h.id for h in after[0].hits]
        assert gone not in ids and len(ids) == 3, (mode, ids)
