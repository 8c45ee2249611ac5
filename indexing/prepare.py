"""Turning request documents into stored ones: chunk, embed, hash (shared by every ingest path)."""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Sequence
from typing import Any

from indexing.chunking import ChunkingParams, chunk_text
from indexing.collection import Collection
from indexing.docstore import StoredDocument
from models import Embedder
from models.cde.context import CorpusContext
from velaio.text import passage_text


def content_hash(doc: dict[str, Any], chunking: Any) -> str:
    """Unchanged documents (same text, title, metadata and chunking) are not embedded again."""
    key = json.dumps([doc.get("title") or "", doc["text"], doc.get("metadata") or {}, repr(chunking)])
    return hashlib.sha256(key.encode()).hexdigest()


def prepare_documents(
    docs: Sequence[dict[str, Any]], coll: Collection, embedder: Embedder, context: CorpusContext | None = None
) -> list[StoredDocument]:
    """Chunk every document and embed all passages of the batch in one pass (with the collection's corpus
    context when the embedder is contextual)."""
    return chunk_and_embed(docs, chunking=coll.settings.chunking, embedder=embedder, context=context)


def rewrite_if_only_metadata(coll: Collection, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Changed documents whose stored title and text are the same get their new metadata without re-embedding,
    as PATCH does; the others are returned, to embed."""
    stored = coll.documents([d["id"] for d in docs])
    same, rest = [], []
    for d in docs:
        rec = stored.get(d["id"])
        if rec is not None and rec.title == (d.get("title") or "") and rec.text == d["text"]:
            same.append((rec.doc_id, d.get("metadata") or {}, content_hash(d, coll.settings.chunking)))
        else:
            rest.append(d)
    if same:
        coll.rewrite_metadata(same)
    return rest


_CHUNKERS: dict[int, tuple[Any, threading.Lock, Any]] = {}
_CHUNKERS_LOCK = threading.Lock()


def chunking_tokenizer(embedder: Embedder) -> tuple[Any, threading.Lock]:
    """A copy of the embedder's tokenizer for chunking, with its own lock. A fast tokenizer keeps padding and
    truncation in the tokenizer object and every call sets them: chunking (no truncation, no padding) on the
    tokenizer that encodes queries at the same moment (padding on) made a query batch ragged, and the search
    failed. Chunking never shares its tokenizer with the encoder, nor with another chunking thread."""
    with _CHUNKERS_LOCK:
        entry = _CHUNKERS.get(id(embedder))
        if entry is None or entry[2] is not embedder.tokenizer:  # the original kept: an id is not reused meanwhile
            entry = _CHUNKERS[id(embedder)] = (copy.deepcopy(embedder.tokenizer), threading.Lock(), embedder.tokenizer)
        return entry[0], entry[1]


def chunk_and_embed(
    docs: Sequence[dict[str, Any]],
    *,
    chunking: ChunkingParams,
    embedder: Embedder,
    context: CorpusContext | None = None,
) -> list[StoredDocument]:
    """prepare_documents without a collection at hand (a Ray Data encoder actor holds only the settings)."""
    tokenizer, lock = chunking_tokenizer(embedder)
    with lock:
        spans = [chunk_text(d["text"], tokenizer, chunking) for d in docs]
    texts = [
        passage_text(d.get("title") or "", d["text"][s.start : s.end])
        for d, doc_spans in zip(docs, spans, strict=True)
        for s in doc_spans
    ]
    vectors = embedder.encode_documents(texts, context=context)  # (P, d)
    out, row = [], 0
    for d, doc_spans in zip(docs, spans, strict=True):
        n = len(doc_spans)
        out.append(
            StoredDocument(
                doc_id=d["id"],
                title=d.get("title") or "",
                text=d["text"],
                metadata=d.get("metadata") or {},
                content_hash=content_hash(d, chunking),
                spans=[(s.start, s.end) for s in doc_spans],
                embeddings=vectors[row : row + n],
                context_id=context.id if context is not None else "",
            )
        )
        row += n
    return out
