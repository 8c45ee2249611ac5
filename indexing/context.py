"""The corpus context of a CDE collection: sampled once, cached with the collection, refreshed on drift.

Layout under `<collection>/` (each generation, indexing/generations.py, has its own):
    context/context.json, context.vectors.npy   the context new documents are embedded with (CorpusContext)
    context/state.json                          {"doc_changes": N, "generation": G}: the doc store's change
                                                counter when it was sampled, and how many were sampled before
Each snapshot copies the context its vectors were made with (see indexing/snapshot.py), so a query is always
encoded with the context of the snapshot it searches, and M1 never runs at query time.

A refresh is a reindex to the same embedder (indexing/reindex.py): when the corpus drifted, the ingest job that
noticed queues one; it samples a new context from the serving generation's documents into a new generation,
embeds every document there while the current generation keeps serving and taking writes, catches up, and
switches, with progress, cancel, kill-and-resume and rollback as every reindex has them.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from indexing import generations as gens
from indexing.collection import Collection
from indexing.jobs import JobKind, JobStore
from models import Embedder
from models.cde.context import CorpusContext
from velaio.text import passage_text

log = logging.getLogger("vela.context")
CONTEXT_DIR = "context"
STATE_FILE = "state.json"
REEMBED_DOCS = 64  # documents per re-embedding transaction


def _read_state(coll: Collection) -> dict[str, int]:
    path = coll.root / CONTEXT_DIR / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else {"doc_changes": 0, "generation": 0}


def _write_state(coll: Collection, state: dict[str, int]) -> None:
    path = coll.root / CONTEXT_DIR / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def current_context(coll: Collection) -> CorpusContext | None:
    folder = coll.root / CONTEXT_DIR
    return CorpusContext.load(folder) if CorpusContext.exists(folder) else None


def sample_context(
    coll: Collection,
    embedder: Any,
    *,
    incoming: Sequence[dict[str, Any]] = (),
    seed: int = 0,
    source: Collection | None = None,
) -> CorpusContext:
    """J documents of the corpus (stored ones and those about to be stored), seeded; with replacement when
    the corpus has fewer than J. Embedded by the first stage once, and saved as the collection's context.
    `source`: the generation whose documents are the corpus, when `coll` is one being built from it."""
    pool_of = source or coll
    stored = pool_of.docstore.document_ids()
    known = set(stored)
    new = {str(d["id"]): passage_text(d.get("title") or "", d["text"]) for d in incoming if str(d["id"]) not in known}
    pool = stored + list(new)
    if not pool:
        raise ValueError(f"collection {coll.name!r} has no documents to sample a context from")
    j = int(embedder.corpus_context_size)
    rng = np.random.default_rng(seed)
    picks = [pool[i] for i in rng.choice(len(pool), size=j, replace=len(pool) < j)]
    texts = pool_of.docstore.document_texts([p for p in picks if p in known])
    texts.update(new)
    ctx = embedder.make_context(picks, [texts[p] for p in picks], corpus_documents=len(pool), seed=seed)
    ctx.save(coll.root / CONTEXT_DIR)
    # The incoming documents are in the sample already: their own upserts are not drift. `generation` counts
    # samples (the next one is seeded with it).
    _write_state(coll, {"doc_changes": coll.docstore.doc_changes() + len(new), "generation": seed + 1})
    log.info(
        "corpus context sampled",
        extra={"collection": coll.name, "context": ctx.id, "documents": len(pool), "j": j, "seed": seed},
    )
    return ctx


def ensure_context(coll: Collection, embedder: Any, incoming: Sequence[dict[str, Any]]) -> CorpusContext:
    """The context to embed new documents with: the cached one when this model made it, else a new sample."""
    ctx = current_context(coll)
    if ctx is not None and ctx.fingerprint == embedder.fingerprint:
        return ctx
    return sample_context(coll, embedder, incoming=incoming, seed=_read_state(coll)["generation"])


def drift(coll: Collection, ctx: CorpusContext) -> float:
    """Documents written or deleted since the context was sampled, as a fraction of the corpus then."""
    changed = coll.docstore.doc_changes() - _read_state(coll)["doc_changes"]
    return max(0, changed) / max(1, ctx.corpus_documents)


def refresh_due(coll: Collection, embedder: Any, fraction: float) -> bool:
    """The corpus moved further than `fraction` from the sample the serving context came from."""
    if not embedder.contextual:
        return False
    ctx = current_context(coll)
    return ctx is not None and drift(coll, ctx) > fraction


def context_for_generation(source: Collection, target: Collection, embedder: Any) -> CorpusContext:
    """The context a generation being built from `source` embeds with: its own once sampled (a resumed reindex
    keeps it), else a new sample of the source's documents, seeded one further than the source's."""
    ctx = current_context(target)
    if ctx is not None and ctx.fingerprint == embedder.fingerprint:
        return ctx
    return sample_context(target, embedder, seed=_read_state(source)["generation"] + 1, source=source)


def settle_drift(coll: Collection) -> None:
    """A generation just brought up to its source counts no drift: its context was sampled from that corpus."""
    _write_state(coll, {**_read_state(coll), "doc_changes": coll.docstore.doc_changes()})


def reembed_stale(
    coll: Collection, embedder: Any, ctx: CorpusContext, on_progress: Callable[[int], None] | None = None
) -> int:
    """Re-embed every document made with another context, in small transactions; returns how many."""
    done = 0
    while batch := coll.docstore.stale_documents(ctx.id, REEMBED_DOCS):
        texts = [passage_text(title, text[s:e]) for _, title, text, spans in batch for s, e in spans]
        vectors = embedder.encode_documents(texts, context=ctx)  # (P, d)
        items, row = [], 0
        for doc_id, _, _, spans in batch:
            items.append((doc_id, vectors[row : row + len(spans)]))
            row += len(spans)
        coll.docstore.replace_many(items, ctx.id)
        done += len(batch)
        if on_progress is not None:
            on_progress(done)
    if done:
        log.info("re-embedded with the current context", extra={"collection": coll.name, "documents": done})
    return done


def commit_collection(coll: Collection, embedder: Embedder) -> int:
    """Publish the doc store as the next snapshot; a CDE collection first brings every document to its
    current context, and the snapshot carries that context."""
    if not embedder.contextual:
        return coll.commit()
    ctx = current_context(coll)
    if ctx is None:  # nothing ever ingested: an empty snapshot needs no context
        return coll.commit()
    reembed_stale(coll, embedder, ctx)
    return coll.commit(context=ctx)


CONTEXT_REFRESH = "context refresh"  # the reason a reindex to the collection's own embedder records


def queue_context_refresh(jobs: JobStore, coll: Collection) -> str | None:
    """Record a reindex of a CDE collection to its own embedder: a new generation with a new corpus context
    (indexing/context.py). None when a reindex of the collection is queued or under way already: it samples
    from the corpus as it is when it starts."""
    for job_id in jobs.unfinished():
        other = jobs.get(job_id)
        if other.collection == coll.name and other.kind == JobKind.REINDEX:
            return None
    root = gens.collection_root(coll)
    pointer = gens.read_pointer(root)
    spec = {
        "collection": coll.name,
        "embedder": coll.settings.embedder,
        "embedder_name": pointer.name_of(pointer.current) or "",
        "reason": CONTEXT_REFRESH,
    }
    job = jobs.create(collection=coll.name, kind=JobKind.REINDEX, payload=[spec], follow_up=True)
    log.info("corpus drifted: context refresh queued", extra={"collection": coll.name, "job_id": job.id})
    return job.id
