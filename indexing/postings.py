"""BM25 postings of one segment, scored at query time with corpus-wide statistics (as Lucene does).

A segment stores raw term frequencies, not scores: bm25s bakes idf and the average length into its matrix
when it indexes, and those change with every commit and delete. Here a query first gathers N, the total
length and each query term's document frequency over every live passage of every segment of every shard
(`TermStats`), then each segment scores its own postings with those numbers. The idf and tf formulas are
bm25s's own (`bm25s.scoring`), so a collection of many segments scores exactly as one index over its live
passages would. The okapi variant is rank_bm25's (its idf floor: epsilon x the mean idf of every term).

Files (named .npy, no pickle, memory-mapped):
    terms.json     the segment's vocabulary, local term id = position
    indptr.npy     (V + 1,) int64   postings of term t are rows[indptr[t]:indptr[t + 1]]
    rows.npy       (nnz,)   int32   segment rows (passages), ascending within a term
    tf.npy         (nnz,)   float32 term frequency in that passage
    lengths.npy    (n,)     int32   passage length in tokens
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

from indexing.bm25 import BM25Params, TokenIdCorpus
from velaio.files import load_npy


@dataclass(frozen=True)
class TermStats:
    """What BM25 needs of the live corpus for one query batch: passages, tokens, df of the query terms."""

    n_docs: int
    total_len: int
    df: Mapping[str, int]
    mean_idf: float = 0.0  # okapi only: rank_bm25's mean idf over every term of the corpus

    @property
    def avg_len(self) -> float:
        return self.total_len / max(self.n_docs, 1)

    @classmethod
    def merge(cls, parts: Sequence[TermStats], mean_idf: float = 0.0) -> TermStats:
        df: dict[str, int] = {}
        for p in parts:
            for t, c in p.df.items():
                df[t] = df.get(t, 0) + c
        return cls(sum(p.n_docs for p in parts), sum(p.total_len for p in parts), df, mean_idf)


def okapi_mean_idf(n_docs: int, df: np.ndarray) -> float:
    """rank_bm25's average idf over the corpus vocabulary (df > 0), which floors negative idfs."""
    df = df[df > 0].astype(np.float64)
    return float(np.log((n_docs - df + 0.5) / (df + 0.5)).mean()) if df.size else 0.0


def idf_of(params: BM25Params, df: int, stats: TermStats) -> float:
    n = stats.n_docs
    if params.method == "okapi":
        idf = math.log((n - df + 0.5) / (df + 0.5))
        return params.epsilon * stats.mean_idf if idf < 0 else idf
    return float(_select_idf_scorer(params.method)(df, N=n))


class Postings:
    def __init__(self, terms: list[str], indptr: np.ndarray, rows: np.ndarray, tf: np.ndarray, lengths: np.ndarray):
        self.terms = terms
        self.vocab = {t: i for i, t in enumerate(terms)}
        self.indptr, self.rows, self.tf, self.lengths = indptr, rows, tf, lengths
        self._dl = np.asarray(lengths, dtype=np.float64)  # (n,) made once: every scored term reads it

    @classmethod
    def build(cls, docs_tokens: Sequence[Sequence[str]]) -> Postings:
        """Postings of passages given as token lists, row i = docs_tokens[i]."""
        corpus = TokenIdCorpus()
        corpus.add([list(d) for d in docs_tokens])
        return cls.from_corpus(corpus)

    @classmethod
    def from_corpus(cls, corpus: TokenIdCorpus) -> Postings:
        flat, offsets = corpus.token_arrays()  # (T,) int32 term ids, (n + 1,) int64
        n = int(offsets.shape[0] - 1)
        lengths = np.diff(offsets).astype(np.int32)  # (n,)
        row_of = np.repeat(np.arange(n, dtype=np.int64), lengths)  # (T,)
        terms = sorted(corpus.vocab, key=corpus.vocab.__getitem__)
        return cls.from_triples(terms, flat.astype(np.int64), row_of, np.ones(flat.shape[0], np.float32), lengths)

    @classmethod
    def from_triples(
        cls, terms: list[str], term_of: np.ndarray, row_of: np.ndarray, tf: np.ndarray, lengths: np.ndarray
    ) -> Postings:
        """Postings from (term, row, tf) entries in any order; entries repeating a (term, row) are summed."""
        n, v = int(lengths.shape[0]), max(len(terms), 1)
        keys, inverse = np.unique(term_of * max(n, 1) + row_of, return_inverse=True)  # by term, then row
        sums = np.bincount(inverse.ravel(), weights=tf, minlength=keys.shape[0]) if keys.size else np.empty(0)
        indptr = np.zeros(v + 1, np.int64)
        np.cumsum(np.bincount(keys // max(n, 1), minlength=v), out=indptr[1:])
        rows = (keys % max(n, 1)).astype(np.int32)
        return cls(list(terms), indptr, rows, sums.astype(np.float32), lengths.astype(np.int32))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "terms.json").write_text(json.dumps(self.terms))
        for name in ("indptr", "rows", "tf", "lengths"):
            np.save(directory / f"{name}.npy", getattr(self, name), allow_pickle=False)

    @classmethod
    def load(cls, directory: Path) -> Postings:
        # Memory-mapped, then seen as plain arrays: slicing a np.memmap costs a subclass round trip per call.
        arrays = [
            np.asarray(load_npy(directory / f"{n}.npy", mmap_mode="r")) for n in ("indptr", "rows", "tf", "lengths")
        ]
        p = cls(json.loads((directory / "terms.json").read_text()), *arrays)
        bad_size = int(p.indptr[-1]) != p.rows.shape[0] or p.rows.shape != p.tf.shape
        if p.indptr.shape != (max(len(p.terms), 1) + 1,) or bad_size:
            raise ValueError(f"{directory}: postings do not match their vocabulary")
        return p

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def select(self, keep: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """The postings of rows `keep` (ascending), renumbered 0..len(keep)-1: (terms, term of each posting,
        new row of each posting, tf). A merge concatenates these from its segments."""
        new_row = np.full(len(self), -1, np.int64)
        new_row[keep] = np.arange(keep.shape[0])
        term_of = np.repeat(np.arange(len(self.indptr) - 1), np.diff(self.indptr))  # (nnz,)
        moved = new_row[self.rows]  # (nnz,)
        live = moved >= 0
        return self.terms, term_of[live], moved[live], np.asarray(self.tf)[live]

    # --- statistics ------------------------------------------------------------------------------
    def live_df(self, live: np.ndarray | None) -> np.ndarray:
        """(V,) passages containing each term, counting live rows only (None: every row is live)."""
        counts = np.diff(self.indptr)
        if live is None or not counts.size:
            return counts
        hit = np.concatenate([[0], np.cumsum(np.asarray(live)[self.rows], dtype=np.int64)])  # (nnz + 1,)
        return hit[self.indptr[1:]] - hit[self.indptr[:-1]]  # type: ignore[no-any-return]

    def stats(self, terms: set[str], live: np.ndarray | None, live_df: np.ndarray) -> TermStats:
        lengths = np.asarray(self.lengths, dtype=np.int64)
        total = int(lengths.sum() if live is None else lengths[live].sum())
        n = len(self) if live is None else int(np.count_nonzero(live))
        df = {t: int(live_df[self.vocab[t]]) for t in terms if t in self.vocab}
        return TermStats(n, total, df)

    # --- scoring ---------------------------------------------------------------------------------
    def score(self, query: Sequence[str], stats: TermStats, params: BM25Params) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores float64) of the rows that contain a query term, in row order."""
        return score_segments([self], np.zeros(1, np.int64), self._dl, query, stats, params)


def score_segments(
    postings: Sequence[Postings],
    bases: np.ndarray,
    lengths: np.ndarray,
    query: Sequence[str],
    stats: TermStats,
    params: BM25Params,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 of a query over several segments' postings in one pass: (rows, scores float64) of the rows that
    contain a query term, ascending. Rows are numbered across the segments: segment i's row r is bases[i] + r,
    and lengths (float64) is every row's length in that numbering.

    A term repeated in the query counts again, as in bm25s; terms the live corpus lacks (df 0) count nothing.
    The idfs are computed once per query, and every segment's postings are gathered into one array, so the
    numpy work is done once whatever the number of segments (a per-segment pass costs ~45 µs a query)."""
    known = [t for t in query if stats.df.get(t, 0) > 0]
    if not known:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    method = "lucene" if params.method == "okapi" else params.method
    tfc = _select_tfc_scorer("atire" if params.method == "okapi" else method)
    avg = stats.avg_len
    idfs = [idf_of(params, stats.df[t], stats) for t in known]
    if method in ("bm25l", "bm25+"):  # what a term adds to a passage that lacks it
        absents = [idf * tfc(0, avg, avg, params.k1, params.b, params.delta) for idf in idfs]
    else:
        absents = [0.0] * len(known)
    base_score = float(sum(absents))
    # Segment by segment, query term by query term: each row lives in one segment, so its contributions are
    # summed in query-term order, as one index over every row would sum them.
    row_parts, tf_parts, offsets, counts, weights, minus = [], [], [], [], [], []
    for seg, base in zip(postings, bases.tolist(), strict=True):
        vocab, indptr = seg.vocab, seg.indptr
        for t, idf, absent in zip(known, idfs, absents, strict=True):
            i = vocab.get(t)
            if i is None:
                continue
            lo, hi = int(indptr[i]), int(indptr[i + 1])
            if hi > lo:
                row_parts.append(seg.rows[lo:hi])
                tf_parts.append(seg.tf[lo:hi])
                offsets.append(base)
                counts.append(hi - lo)
                weights.append(idf)
                minus.append(absent)
    if not row_parts:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    rows = np.concatenate(row_parts).astype(np.int64) + np.repeat(offsets, counts)  # (m,)
    tf = np.concatenate(tf_parts).astype(np.float64)  # (m,)
    contrib = np.repeat(weights, counts) * tfc(tf, lengths[rows], avg, params.k1, params.b, params.delta)
    if base_score:
        contrib -= np.repeat(minus, counts)
    uniq, inverse = np.unique(rows, return_inverse=True)
    return uniq, np.bincount(inverse.ravel(), weights=contrib, minlength=uniq.shape[0]) + base_score


def concat_postings(parts: Sequence[Postings]) -> Postings:
    """One Postings over several segments' rows, one segment after another (row r of part i becomes
    sum(len(parts[:i])) + r). Term ids are renumbered over the union of the vocabularies; a stable sort by
    term keeps each term's rows ascending, since the parts' rows already are."""
    vocab: dict[str, int] = {}
    term_parts, row_parts, tf_parts, len_parts = [], [], [], []
    base = 0
    for p in parts:
        ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in p.terms), np.int64, count=len(p.terms))
        counts = np.diff(p.indptr)[: len(p.terms)]  # (V,); an empty vocabulary has one empty slot
        term_parts.append(np.repeat(ids, counts))
        row_parts.append(np.asarray(p.rows, dtype=np.int64) + base)
        tf_parts.append(np.asarray(p.tf))
        len_parts.append(np.asarray(p.lengths))
        base += len(p)
    term_of = np.concatenate(term_parts) if term_parts else np.empty(0, np.int64)  # (nnz,)
    order = np.argsort(term_of, kind="stable")
    indptr = np.zeros(max(len(vocab), 1) + 1, np.int64)
    np.cumsum(np.bincount(term_of, minlength=len(vocab)), out=indptr[1 : len(vocab) + 1])
    indptr[len(vocab) + 1 :] = indptr[len(vocab)]
    rows = np.concatenate(row_parts)[order].astype(np.int32) if row_parts else np.empty(0, np.int32)
    tf = np.concatenate(tf_parts)[order] if tf_parts else np.empty(0, np.float32)
    lengths = np.concatenate(len_parts) if len_parts else np.empty(0, np.int32)
    return Postings(list(vocab), indptr, rows, tf, lengths)
