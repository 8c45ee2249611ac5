"""Bringing one generation's documents up to another's: the copy a reindex starts with, and every catch-up after.

Writes that arrive during a reindex go to the generation that serves, as always; the new one catches up by
comparing the two doc stores (the source of truth of each): a document the target lacks, or holds in another
version (its content hash, under the target's chunking, differs), is embedded with the target's embedder; one the
source no longer has is deleted. The comparison is the replay of every write since the reindex began, whatever
process made it, with no log to keep; run again after a crash it finds only what is left to do (idempotent).

Where the target's embedder encodes documents exactly as the source's did (a model `vela adapt` trained on the
query side keeps its base as the document encoder), the source's stored vectors are copied instead
(indexing/vector_reuse.py).

A contextual (CDE) target embeds with a corpus context of its own, sampled from the source's documents when its
build begins and kept across resumes (indexing/context.py): a CDE collection's context refresh is this copy."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from indexing.collection import Collection
from indexing.context import commit_collection, context_for_generation, settle_drift
from indexing.docstore import StoredDocument
from indexing.prepare import content_hash, prepare_documents, rewrite_if_only_metadata
from indexing.shards import ShardedCollection
from indexing.vector_reuse import VectorReuse, copied_documents
from models import Embedder

PAGE = 256  # documents read and compared per step; embedded and stored EMBED_STEP at a time
EMBED_STEP = 32  # documents embedded and stored between two looks at should_stop (a kill loses at most these)


@dataclass
class SyncOutcome:
    embedded: int = 0  # documents (re-)embedded into the target
    copied: int = 0  # documents stored with the source's vectors (the embedder encodes documents as it did)
    rewritten: int = 0  # documents whose metadata alone changed: rewritten in the target, not embedded
    deleted: int = 0  # documents deleted from the target
    unchanged: int = 0
    cancelled: bool = False

    @property
    def changed(self) -> int:
        return self.embedded + self.copied + self.rewritten + self.deleted


def stored_hashes(coll: Collection) -> dict[str, str]:
    """{doc_id: content_hash} of every stored document, over every shard."""
    out: dict[str, str] = {}
    for shard in coll.shard_list:
        store = shard.docstore
        ids = store.document_ids()
        for i in range(0, len(ids), 5000):
            out.update(store.content_hashes(ids[i : i + 5000]))
    return out


def _wanted(source: Collection, target: Collection) -> dict[str, str]:
    """Each source document's content hash as the target would store it. With the same chunking that is the
    stored hash itself (no text read); with other chunking it is computed from the stored document."""
    src = stored_hashes(source)
    if source.settings.chunking == target.settings.chunking:
        return src
    out: dict[str, str] = {}
    ids = list(src)
    for i in range(0, len(ids), PAGE):
        for doc_id, rec in source.documents(ids[i : i + PAGE]).items():
            doc = {"title": rec.title, "text": rec.text, "metadata": rec.metadata}
            out[doc_id] = content_hash(doc, target.settings.chunking)
    return out


def pending(source: Collection, target: Collection) -> tuple[list[str], list[str], int]:
    """(ids to embed, ids to delete, documents already the same) to make the target hold the source's documents."""
    wanted = _wanted(source, target)
    have = stored_hashes(target)
    todo = [d for d, h in wanted.items() if have.get(d) != h]
    gone = [d for d in have if d not in wanted]
    return todo, gone, len(wanted) - len(todo)


def _pages(ids: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(ids), PAGE):
        yield ids[i : i + PAGE]


def _store(target: Collection, prepared: list[StoredDocument]) -> None:
    if not prepared:
        return
    if isinstance(target, ShardedCollection):
        target.upsert(prepared)
    else:
        target.docstore.upsert(prepared)


def sync(
    source: Collection,
    target: Collection,
    embedder: Embedder,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    on_progress: Callable[[int, int], None] | None = None,
    commit: bool = True,
    reuse: VectorReuse | None = None,
) -> SyncOutcome:
    """Make the target hold the source's documents (see the module's doc), then publish the target when anything
    changed. The caller holds the target's writer lock. `on_progress(done, total)` counts source documents;
    with `reuse`, the source's vectors are copied where its probe finds that `embedder` encodes documents as the
    source's embedder does (no `reuse`: every document encoded)."""
    context = None
    if embedder.contextual:  # a CDE embedder: the target's own corpus context (a refresh samples a new one)
        if isinstance(target, ShardedCollection):
            raise ValueError(f"collection {target.name!r} is sharded: contextual embedders are not supported")
        context = context_for_generation(source, target, embedder)
    todo, gone, same = pending(source, target)
    out = SyncOutcome(unchanged=same)
    total = same + len(todo)
    if on_progress is not None:
        on_progress(same, total)
    if source.settings.schema != target.settings.schema:
        target.set_schema(source.settings.schema)  # declared during the reindex: the new generation has it too
    for page in _pages(gone):
        for store, ids in target.by_store(page):
            store.delete(ids)
        out.deleted += len(page)
    copy = reuse is not None and reuse.copies(embedder, target, source, todo)
    looked_at = 0  # documents of todo handled, or found deleted since the comparison
    for page in _pages(todo):
        if should_stop():
            out.cancelled = True
            break
        records = source.documents(page)  # a document deleted since the comparison is left to the next pass
        docs = [{"id": r.doc_id, "title": r.title, "text": r.text, "metadata": r.metadata} for r in records.values()]
        n = len(docs)
        docs = rewrite_if_only_metadata(target, docs) if docs else docs  # a metadata change is not embedded again
        out.rewritten += n - len(docs)
        if docs and copy:
            prepared = copied_documents(source, target, [str(d["id"]) for d in docs])
            _store(target, prepared)
            out.copied += len(prepared)
        # Each step is stored as soon as it is embedded: a cancel (or a deleted collection) waits one step, not a
        # page, a kill loses at most that step, and the job's progress moves with every step.
        for i in range(0, len(docs) if not copy else 0, EMBED_STEP):
            if i and should_stop():
                out.cancelled = True
                break
            prepared = prepare_documents(docs[i : i + EMBED_STEP], target, embedder, context)
            _store(target, prepared)
            out.embedded += len(prepared)
            if on_progress is not None and i + EMBED_STEP < len(docs):
                on_progress(same + looked_at + (n - len(docs)) + i + EMBED_STEP, total)
        if out.cancelled:
            break
        looked_at += len(page)
        if on_progress is not None:
            on_progress(same + looked_at, total)  # a document deleted meanwhile is done too: nothing to copy
    if context is not None and not out.cancelled:
        settle_drift(target)  # the copy's own writes are not drift
    if commit and out.changed:
        commit_collection(target, embedder)
    return out
