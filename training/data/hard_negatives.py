"""Teacher-scored training data: consistency filtering of weak pairs, positive-aware hard-negative mining.

A teacher (any embedder, or BM25) scores every query of the pairs against a document pool: the pairs' own
documents, plus an optional corpus. Per pair (Nomic Embed v2, 3.3.2-3.3.3 and 4.2-4.4):

- consistency filtering keeps the pair only if its document is in the teacher's top-k for its query;
- positive-aware mining (Moreira et al., Eq. 5) takes the H best-scored documents below
  threshold = pos_sim * margin, never a positive of the same query; when the pool has fewer than H such documents
  the rest are random non-positive documents (counted, so a tiny pool shows in the log).

A pool entry is a (doc id, text) pair: mined pairs give one document two texts (with and without its title),
and both are a positive of either of its queries, never a negative.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from training.data.pairs import Pair, read_documents
from velaio.text import passage_text

log = logging.getLogger("vela.train")


@dataclass(frozen=True)
class DocumentPool:
    doc_ids: list[str]
    texts: list[str]

    def __len__(self) -> int:
        return len(self.texts)


def build_pool(pairs: Sequence[Pair], corpus: str | Path | None = None) -> DocumentPool:
    """The pairs' documents, then (optionally) every document of a BEIR folder or JSONL file."""
    seen: dict[tuple[str, str], int] = {}
    for p in pairs:
        seen.setdefault((p.doc_id, p.document), len(seen))
    if corpus:
        for did, (title, text) in read_documents(Path(corpus)).items():
            seen.setdefault((did, passage_text(title, text)), len(seen))
    keys = sorted(seen, key=seen.__getitem__)
    return DocumentPool([k[0] for k in keys], [k[1] for k in keys])


class Teacher(Protocol):
    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """(Q, P) scores of the queries against the whole pool; higher is more relevant."""
        ...


class EmbedderTeacher:
    """Cosine scores of an embedder (any `models.load_embedder` name): the pool is embedded once."""

    def __init__(self, embedder: object, pool: DocumentPool) -> None:
        self.embedder = embedder
        self.docs = embedder.encode_documents(pool.texts)  # type: ignore[attr-defined]  # (P, d)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        q = self.embedder.encode_queries(list(queries))  # type: ignore[attr-defined]  # (Q, d)
        return q @ self.docs.T  # (Q, P)


class BM25Teacher:
    """Lexical scores (the serving core's BM25, Lucene variant); documents sharing no term score 0."""

    def __init__(self, pool: DocumentPool) -> None:
        from indexing.bm25 import BM25Index, BM25Params, tokenize

        self._tokenize = tokenize
        self.size = len(pool)
        self.index = BM25Index.build(tokenize(pool.texts), np.arange(self.size), BM25Params())

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(queries), self.size), np.float32)  # (Q, P)
        for row, (ids, s) in enumerate(self.index.search(self._tokenize(list(queries)), self.size)):
            out[row, ids] = s
        return out


def load_teacher(name: str, pool: DocumentPool) -> Teacher:
    """'bm25', or an embedder name for `models.load_embedder` ('default', a model directory)."""
    if name == "bm25":
        return BM25Teacher(pool)
    from models import load_embedder

    return EmbedderTeacher(load_embedder(name), pool)


def positive_aware_threshold(pos: np.ndarray, margin: float) -> np.ndarray:
    """Eq. 5, pos_sim * margin, written pos - |pos| * (1 - margin) so that it stays below a negative pos_sim."""
    return pos - np.abs(pos) * (1.0 - margin)


@dataclass
class Mined:
    keep: np.ndarray  # (N,) bool: passed consistency filtering (all True when it is off)
    negatives: np.ndarray  # (N, H) int64 pool rows, best-scored first; H = 0 when not mining
    filled: np.ndarray  # (N,) int: how many of the H are random fill (too few below the threshold)
    pool: DocumentPool

    def subset(self, rows: np.ndarray) -> Mined:
        return Mined(self.keep[rows], self.negatives[rows], self.filled[rows], self.pool)


def mine(
    pairs: Sequence[Pair],
    pool: DocumentPool,
    teacher: Teacher,
    *,
    hard_negatives: int = 0,
    margin: float = 0.95,
    consistency_top_k: int = 0,
    seed: int = 0,
    chunk: int = 256,
) -> Mined:
    """Score each pair's query against the pool once; filter (consistency_top_k > 0) and mine (hard_negatives > 0)."""
    row_of = {(d, t): i for i, (d, t) in enumerate(zip(pool.doc_ids, pool.texts, strict=True))}
    rows_of_doc: dict[str, list[int]] = defaultdict(list)
    for i, d in enumerate(pool.doc_ids):
        rows_of_doc[d].append(i)
    positives: dict[str, set[int]] = defaultdict(set)  # query id -> every pool row of every positive document
    for p in pairs:
        positives[p.query_id].update(rows_of_doc[p.doc_id])
    rng = np.random.default_rng(seed)
    n = len(pairs)
    keep = np.ones(n, bool)
    negatives = np.zeros((n, hard_negatives), np.int64)
    filled = np.zeros(n, np.int64)
    for start in range(0, n, chunk):
        part = pairs[start : start + chunk]
        scores = teacher.scores([p.query for p in part])  # (c, P)
        for j, p in enumerate(part):
            i, s = start + j, scores[j]
            own = row_of[(p.doc_id, p.document)]
            allowed = np.ones(len(pool), bool)  # (P,)
            allowed[list(positives[p.query_id])] = False
            if consistency_top_k > 0:
                # Rank among the non-positive documents: the query's other positives do not push this one out.
                keep[i] = int((s[allowed] > s[own]).sum()) < consistency_top_k
            if hard_negatives:
                negatives[i], filled[i] = _negatives(s, allowed, s[own], hard_negatives, margin, rng)
    if consistency_top_k > 0:
        log.info("consistency filtering (top-%d): kept %d of %d pairs", consistency_top_k, keep.sum(), n)
    if hard_negatives:
        log.info(
            "mined %d hard negatives per pair; %d of %d slots random fill",
            hard_negatives,
            filled.sum(),
            n * hard_negatives,
        )
    return Mined(keep, negatives, filled, pool)


def _negatives(
    s: np.ndarray, allowed: np.ndarray, pos: float, h: int, margin: float, rng: np.random.Generator
) -> tuple[np.ndarray, int]:
    """The h best allowed rows scored below the positive-aware threshold, then random allowed rows."""
    below = np.flatnonzero(allowed & (s < positive_aware_threshold(np.asarray(pos), margin)))  # (m,)
    best = below[np.argsort(-s[below], kind="stable")[:h]]
    if len(best) == h:
        return best, 0
    rest = np.setdiff1d(np.flatnonzero(allowed), best)
    if len(best) + len(rest) < h:
        raise ValueError(f"a document pool of {len(s)} cannot give {h} negatives that are not positives")
    fill = rng.choice(rest, h - len(best), replace=False)
    return np.concatenate([best, fill]), h - len(best)
