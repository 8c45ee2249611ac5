"""A reindex whose new embedder encodes documents exactly as the old one did copies their vectors.

`vela adapt` trains the query side alone: the model it registers keeps the base model as its document encoder, so
a collection reindexed to it would spend the whole encoding pass recomputing the vectors it already holds (on
SciFact about as long as the first ingest). Whether the document side is the same is checked on the data rather
than on file names (an adapted model's folder is a copy of its base, re-saved; one base may be served as torch or
as ONNX): a sample of the source's stored passages is chunked again with the new embedder's tokenizer and the
target's chunking, and encoded by both the source's embedder (as it serves now) and the new one. Only when every
span comes out the same and every pair of vectors is within `MIN_COSINE` are the source's vectors copied: the new
model changes nothing about the documents, so the new generation keeps the vectors the collection has. Otherwise
every document is encoded, as before. (The stored vectors are not the reference: a collection ingested at another
precision, bf16 or an int8 graph, holds vectors a little off what the same model serves now, and comparing with
them would refuse the copy for the very model the collection was made with.) A contextual (CDE) embedder never
copies: its vectors depend on the corpus context.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from indexing.chunking import chunk_text
from indexing.collection import Collection
from indexing.docstore import StoredDocument
from indexing.prepare import chunking_tokenizer, content_hash
from models import Embedder
from velaio.text import passage_text

log = logging.getLogger("vela.reindex")
PROBE_DOCUMENTS = 16  # documents sampled across the source (every passage of each is checked)
MAX_PROBE_PASSAGES = 64
# The same weights run the same way give the same vectors (cosine 1 up to rounding); the same weights as an int8
# graph against torch fp32 measure about 0.999, a model fine-tuned for even a few steps lower still.
MIN_COSINE = 0.9999


def _sample(ids: list[str]) -> list[str]:
    ids = sorted(ids)
    step = max(1, len(ids) // PROBE_DOCUMENTS)
    return ids[::step][:PROBE_DOCUMENTS]


def same_document_side(old: Embedder, new: Embedder, target: Collection, source: Collection, todo: list[str]) -> bool:
    """True when `new` gives a sample of the source's documents (from `todo`) the spans the source stores under the
    target's chunking, and the vectors `old` (the source's embedder, as served now) gives them."""
    if old.contextual or new.contextual or not todo or source.settings.chunking != target.settings.chunking:
        return False
    if old.dim != new.dim:
        return False
    docs = source.stored_documents(_sample(todo))
    if not docs:
        return False
    tokenizer, lock = chunking_tokenizer(new)
    texts: list[str] = []
    for d in docs.values():
        with lock:
            spans = [(s.start, s.end) for s in chunk_text(d.text, tokenizer, target.settings.chunking)]
        if spans != list(d.spans):
            return False
        texts += [passage_text(d.title, d.text[a:b]) for a, b in spans]
        if len(texts) >= MAX_PROBE_PASSAGES:
            break
    a = np.asarray(old.encode_documents(texts), dtype=np.float32)  # (P, d)
    b = np.asarray(new.encode_documents(texts), dtype=np.float32)  # (P, d)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)  # (P,)
    same = bool(cos.min() >= MIN_COSINE)
    log.info("document side", extra={"same": same, "probe_passages": len(texts), "min_cosine": float(cos.min())})
    return same


class VectorReuse:
    """Whether a reindex copies the source generation's document vectors. Decided by one probe, on the first
    documents the reindex has to write, and kept for its catch-up passes and its switch: the answer depends only on
    the two embedders and the chunking, none of which changes within one reindex."""

    def __init__(self, old: Embedder) -> None:
        self.old = old  # the source generation's embedder, as served now
        self._same: bool | None = None

    def copies(self, new: Embedder, target: Collection, source: Collection, todo: list[str]) -> bool:
        if self._same is None and todo:
            self._same = same_document_side(self.old, new, target, source, todo)
        return bool(self._same)


def copied_documents(source: Collection, target: Collection, doc_ids: Sequence[str]) -> list[StoredDocument]:
    """The source's documents with their stored spans and vectors, hashed under the target's chunking."""
    out = []
    for d in source.stored_documents(doc_ids).values():
        doc = {"title": d.title, "text": d.text, "metadata": d.metadata}
        out.append(
            StoredDocument(
                d.doc_id,
                d.title,
                d.text,
                d.metadata,
                content_hash(doc, target.settings.chunking),
                d.spans,
                d.embeddings,
            )  # fmt: skip
        )
    return out
