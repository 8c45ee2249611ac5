"""A collection's corpus context for a contextual (CDE) embedder: the first-stage vectors of J sampled documents.

Built once per collection by the indexing worker (M1 runs then, never at query time) and stored with the
collection's indexes; every document and query of the collection is encoded with it.

It lives at the root of the models package, below every architecture, because it is part of the interface
all embedders share (`encode_*(..., context=)`): the base Embedder names it without importing the CDE package.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

VECTORS_FILE = "context.vectors.npy"
META_FILE = "context.json"


@dataclass(frozen=True)
class CorpusContext:
    vectors: np.ndarray  # (J, d) float32: M1 embeddings of the context documents
    doc_ids: tuple[str, ...]  # (J,) the sampled documents (repeats when sampled with replacement)
    fingerprint: str  # the model that produced the vectors (see CdeEmbedder.fingerprint)
    corpus_documents: int = 0  # documents in the collection when the context was sampled
    seed: int = 0

    @functools.cached_property
    def id(self) -> str:
        """Stable identity: equal contexts encode equally, so encoders may batch requests that share it."""
        h = hashlib.sha1(self.fingerprint.encode())
        h.update(np.ascontiguousarray(self.vectors, dtype=np.float32).tobytes())
        return h.hexdigest()[:16]

    def meta(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "doc_ids": list(self.doc_ids),
            "fingerprint": self.fingerprint,
            "corpus_documents": self.corpus_documents,
            "seed": self.seed,
            "shape": list(self.vectors.shape),
        }

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Both files written atomically (temp + os.replace); the JSON last, so it names complete vectors."""
        root = Path(folder)
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / (VECTORS_FILE + ".tmp")
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(self.vectors, dtype=np.float32))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, root / VECTORS_FILE)
        meta_tmp = root / (META_FILE + ".tmp")
        meta_tmp.write_text(json.dumps(self.meta(), indent=1))
        os.replace(meta_tmp, root / META_FILE)

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> CorpusContext:
        root = Path(folder)
        meta = json.loads((root / META_FILE).read_text())
        vectors = np.load(root / VECTORS_FILE)
        ctx = cls(
            vectors=vectors,
            doc_ids=tuple(meta["doc_ids"]),
            fingerprint=meta["fingerprint"],
            corpus_documents=int(meta.get("corpus_documents", 0)),
            seed=int(meta.get("seed", 0)),
        )
        if ctx.id != meta["id"]:
            raise ValueError(f"corpus context in {root} is inconsistent (vectors do not match {META_FILE})")
        return ctx

    @classmethod
    def exists(cls, folder: str | os.PathLike[str]) -> bool:
        return (Path(folder) / META_FILE).is_file() and (Path(folder) / VECTORS_FILE).is_file()
