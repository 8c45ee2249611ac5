"""BM25 with corpus-global statistics, so that the shards of a collection score exactly as one index would.

bm25s precomputes idf(t) * tf-part(tf, dl, avgdl) into its sparse matrix when it indexes; idf needs the
number of passages N and each term's document frequency df, tf-part needs the average passage length. A
shard indexed alone would use its own N, df and avgdl. Here each shard first reports its local counts
(`CorpusStats.of`), the counts are summed (`CorpusStats.merge`), and every shard is then indexed with the
sums (`GlobalStatsBM25`): the float computations are the very ones bm25s makes on the whole corpus, so the
scores are bit-identical. bm25l and bm25+ also add a per-query-term constant at query time for terms a
shard never saw; those two variants are therefore not exact across shards (the others are).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import bm25s
import numpy as np
from bm25s.scoring import (
    _build_idf_array,
    _build_nonoccurrence_array,
    _build_scores_and_indices_for_matrix,
    _calculate_doc_freqs,
    _select_idf_scorer,
    _select_tfc_scorer,
)


class TokenCorpus(Protocol):
    """What bm25s reads: `vocab` (term -> local id) and `ids` (one id list per passage)."""

    vocab: dict[str, int]

    def __len__(self) -> int: ...

    def token_arrays(self) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class CorpusStats:
    """What BM25 needs of the whole corpus: passages, total tokens, and passages containing each term."""

    n_docs: int
    total_len: int
    df: dict[str, int]

    @property
    def avg_len(self) -> np.float64:
        # bm25s takes np.mean of the integer lengths: a float64 sum (exact below 2**53) over n, the same value.
        # It must stay an np.float64 (not a Python float): numpy then computes the tf part in float64, as
        # bm25s does, where a Python float would let it run in float32 and differ in the last bit.
        return np.float64(self.total_len) / np.float64(max(self.n_docs, 1))

    @classmethod
    def of(cls, corpus: TokenCorpus) -> CorpusStats:
        """Local counts of one shard's tokenised passages."""
        flat, offsets = corpus.token_arrays()  # (T,) int32 token ids, (n + 1,) int64 offsets
        n = int(offsets.shape[0] - 1)
        v = max(len(corpus.vocab), 1)
        doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))  # (T,) passage of each token
        pairs = np.unique(doc * v + flat.astype(np.int64))  # (U,) distinct (passage, term) pairs
        counts = np.bincount(pairs % v, minlength=v)  # (V,) passages containing each term
        terms = sorted(corpus.vocab, key=corpus.vocab.__getitem__)
        return cls(n, int(flat.shape[0]), {t: int(counts[i]) for i, t in enumerate(terms) if counts[i]})

    @classmethod
    def merge(cls, parts: Iterable[CorpusStats]) -> CorpusStats:
        df: dict[str, int] = {}
        n = total = 0
        for p in parts:
            n += p.n_docs
            total += p.total_len
            for t, c in p.df.items():
                df[t] = df.get(t, 0) + c
        return cls(n, total, df)

    def df_array(self, vocab: dict[str, int], size: int | None = None) -> np.ndarray:
        """Global df of each local vocabulary id below `size` (default: all of them): (V,) int64."""
        out = np.zeros(len(vocab) if size is None else size, dtype=np.int64)
        for term, i in vocab.items():
            if i < out.shape[0]:
                out[i] = self.df.get(term, 0)
        return out

    def summary(self) -> dict[str, Any]:
        return {"passages": self.n_docs, "tokens": self.total_len, "terms": len(self.df)}


class GlobalStatsBM25(bm25s.BM25):
    """bm25s.BM25 whose index step uses given corpus statistics instead of the corpus it is shown.

    `build_index_from_ids` is bm25s's documented override point; the helpers are bm25s's own, called in
    the same order with the global N, df and avgdl.
    """

    def __init__(self, *, global_df: np.ndarray, n_docs: int, avg_len: np.float64, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._global_df = global_df  # (V,) indexed by local vocabulary id
        self._n_docs = n_docs
        self._avg_len = avg_len

    def build_index_from_ids(
        self,
        unique_token_ids: Sequence[int],
        corpus_token_ids: Any,
        show_progress: bool = True,
        leave_progress: bool = False,
    ) -> dict[str, Any]:
        local_df = _calculate_doc_freqs(corpus_token_ids, unique_token_ids, show_progress=False)
        global_df = {int(t): int(self._global_df[t]) for t in unique_token_ids}
        if self.method in self.methods_requiring_nonoccurrence:
            self.nonoccurrence_array = _build_nonoccurrence_array(
                doc_frequencies=global_df,
                n_docs=self._n_docs,
                compute_idf_fn=_select_idf_scorer(self.idf_method),
                calculate_tfc_fn=_select_tfc_scorer(self.method),
                l_d=self._avg_len,
                l_avg=self._avg_len,
                k1=self.k1,
                b=self.b,
                delta=self.delta,
                dtype=self.dtype,
            )
        else:
            self.nonoccurrence_array = None
        idf = _build_idf_array(global_df, self._n_docs, _select_idf_scorer(self.idf_method), dtype=self.dtype)
        # The local df only sizes the output arrays (one slot per (passage, term) pair of this shard).
        data, rows, cols = _build_scores_and_indices_for_matrix(
            corpus_token_ids=corpus_token_ids,
            idf_array=idf,
            avg_doc_len=self._avg_len,
            doc_frequencies=local_df,
            k1=self.k1,
            b=self.b,
            delta=self.delta,
            nonoccurrence_array=self.nonoccurrence_array,
            method=self.method,
            dtype=self.dtype,
            int_dtype=self.int_dtype,
            show_progress=False,
        )
        n = len(corpus_token_ids)
        data, indices, indptr = self._np_csc(data=data, rows=rows, cols=cols, shape=(n, len(unique_token_ids)))
        return {"data": data.astype(self.dtype), "indices": indices, "indptr": indptr, "num_docs": n}
