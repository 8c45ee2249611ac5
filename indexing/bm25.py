"""BM25 over passages with bm25s (numba backend): tokenisation, variants, and memory-mappable files.

Variants: "lucene" (the default, as Lucene/Elasticsearch score), the bm25s variants "robertson", "atire",
"bm25l", "bm25+", and "okapi", which reproduces `rank_bm25.BM25Okapi` exactly (its idf floor included).
"""

from __future__ import annotations

import json
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import regex
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from velaio.files import load_npy

METHODS = ("lucene", "okapi", "robertson", "atire", "bm25l", "bm25+")
# A term is a word of at least `min_token_chars` characters. 2 is bm25s's (and scikit-learn's) own pattern, the
# default; 1 also keeps single letters and digits, as Lucene's standard analyzer does ("vitamin D", "type 2").
TOKEN_RES = {2: regex.compile(r"(?u)\b\w\w+\b"), 1: regex.compile(r"(?u)\b\w+\b")}
IDS_FILE = "ids.npy"
PARAMS_FILE = "params.json"


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    return Stemmer.Stemmer("english")


_STOP = frozenset(STOPWORDS_EN)


# How text is normalised before it is split into terms. "nfkc": Unicode NFKC, as Elasticsearch's icu_normalizer
# and Lucene's ICU folding start, so that one text written two ways is one term: "café" composed or as "e" plus
# a combining accent, the ligature "ﬁ" and "fi", full-width "ＡＢＣ" and "ABC". "none": the text as it is (the
# collections made before this setting existed, whose stored terms were made so).
NORMALIZATIONS = ("none", "nfkc")


def normalized(text: str, normalize: str) -> str:
    return unicodedata.normalize("NFKC", text) if normalize == "nfkc" else text


def tokenize(
    texts: Sequence[str], *, stem: bool = True, stopwords: bool = True, min_chars: int = 2, normalize: str = "none"
) -> list[list[str]]:
    """Lowercase words of `min_chars`+ characters (a collection's `bm25.min_token_chars`) of the text normalised
    as `normalize` says (its `bm25.normalize`), English stopwords dropped, Snowball-stemmed. Documents and queries
    go through this same function with the collection's settings, so their tokens always meet."""
    out = []
    stemmer = _stemmer()
    pattern = TOKEN_RES[min_chars]
    for text in texts:
        words = pattern.findall(normalized(text, normalize).lower())
        if stopwords:
            words = [w for w in words if w not in _STOP]
        out.append(stemmer.stemWords(words) if stem else words)
    return out


def term_spans(text: str, terms: frozenset[str], min_chars: int = 2, normalize: str = "none") -> list[tuple[int, int]]:
    """Character spans [start, end) of the words of `text` that `tokenize` turns into one of `terms` (a query's
    tokens): what BM25 matched in it, for highlighting.

    `tokenize` normalises and lowercases the whole text before it splits it, and lowercasing depends on context (a
    capital sigma becomes final or medial by what follows it), so the words are found in that text, as there, and
    their offsets mapped back to the text's (a few characters, such as a dotted capital I, lowercase to two; NFKC
    composes an "e" and its accent into one, and spreads a ligature over two).

    Sorted, and none overlapping: NFKC can spread one character over several words ("\ufdfa", one character, is
    four Arabic words), each matching, and each mapped back to that same character; overlapping spans are merged
    into one, so a client that marks them up marks each character once. Spans that only touch stay apart."""
    if not terms:
        return []
    stemmer = _stemmer()
    norm, spans = _normalized_spans(text, normalize)
    lowered = norm.lower()
    owner: list[int] | None = None  # lowered position -> the normalised character it came from, where they differ
    if len(lowered) != len(norm):
        owner = [i for i, ch in enumerate(norm) for _ in range(len(ch.lower()))]
    out: list[tuple[int, int]] = []
    for m in TOKEN_RES[min_chars].finditer(lowered):
        if m.group() not in _STOP and stemmer.stemWord(m.group()) in terms:
            s, e = m.span()
            s, e = (s, e - 1) if owner is None else (owner[s], owner[e - 1])
            start, end = (s, e + 1) if spans is None else (spans[s][0], spans[e][1])
            # The words come in order, so mapped back their spans start in order: only the last can overlap.
            if out and start < out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], end))
            else:
                out.append((start, end))
    return out


def _normalized_spans(text: str, normalize: str) -> tuple[str, list[tuple[int, int]] | None]:
    """The normalised text, and for each of its characters the [start, end) of the text it came from (None when
    normalising changed nothing). Normalised a character with the combining marks after it at a time, which is
    NFKC of the whole for all but rare sequences (conjoining Hangul jamo spelled out): a highlight's bounds."""
    norm = normalized(text, normalize)
    if norm == text:
        return text, None
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or unicodedata.combining(text[i]) == 0:
            piece = normalized(text[start:i], normalize)
            pieces.append(piece)
            spans.extend([(start, i)] * len(piece))
            start = i
    return "".join(pieces), spans


@dataclass(frozen=True)
class BM25Params:
    method: str = "lucene"
    k1: float = 1.2
    b: float = 0.75
    delta: float = 0.5  # bm25l / bm25+ only
    epsilon: float = 0.25  # okapi only: rank_bm25's floor for negative idf, as a share of the mean idf
    min_token_chars: int = 2  # the shortest word that is a term: 2 (bm25s's pattern) or 1 (single letters, digits)
    normalize: str = "none"  # "nfkc" for collections made since it exists (VELA_BM25_NORMALIZE); stored ones: none

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"bm25 method must be one of {METHODS}, got {self.method!r}")
        if self.k1 < 0:
            raise ValueError(f"bm25 k1 must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ValueError(f"bm25 b must be in [0, 1], got {self.b}")
        if self.min_token_chars not in TOKEN_RES:
            raise ValueError(f"bm25 min_token_chars must be 1 or 2, got {self.min_token_chars}")
        if self.normalize not in NORMALIZATIONS:
            raise ValueError(f"bm25 normalize must be one of {NORMALIZATIONS}, got {self.normalize!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BM25Params:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def _okapi_reweight(model: bm25s.BM25, n_docs: int, k1: float, epsilon: float) -> None:
    """Turn a lucene-scored matrix into rank_bm25's Okapi scores, column by column.

    Lucene's tf part is Okapi's without the constant (k1 + 1) factor, and its idf
    log(1 + (N-df+.5)/(df+.5)) is always > 0, so each column can be rescaled by
    (k1 + 1) * idf_okapi / idf_lucene without losing its tf values.
    """
    data, indptr = model.scores["data"], model.scores["indptr"]
    df = np.diff(indptr).astype(np.float64)  # (V,) documents per vocabulary column
    present = df > 0
    inner = (n_docs - df + 0.5) / (df + 0.5)
    idf_okapi = np.log(inner)  # (V,)
    # rank_bm25 averages idf over every word of the corpus, then floors the negative ones.
    mean_idf = idf_okapi[present].mean() if present.any() else 0.0
    idf_okapi = np.where(idf_okapi < 0, epsilon * mean_idf, idf_okapi)
    idf_lucene = np.log1p(inner)
    scale = np.where(present, (k1 + 1.0) * idf_okapi / idf_lucene, 0.0)
    model.scores["data"] = (data * np.repeat(scale, np.diff(indptr))).astype(data.dtype)


class TokenIdCorpus:
    """A tokenised corpus kept compact while it grows: one int32 vocabulary id per token plus document
    lengths (about 4 bytes a token, where lists of Python strings cost about 60). bm25s reads it through
    its `.ids` / `.vocab` protocol, one document's id list at a time."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self._parts: list[np.ndarray] = []  # int32 token ids, one array per `add`
        self._lengths: list[np.ndarray] = []  # int64 tokens per document
        self._flat = np.empty(0, np.int32)
        self._offsets = np.zeros(1, np.int64)

    def add(self, docs_tokens: Iterable[list[str]]) -> None:
        docs_tokens = list(docs_tokens)
        vocab = self.vocab
        ids = [vocab.setdefault(t, len(vocab)) for doc in docs_tokens for t in doc]
        self._parts.append(np.asarray(ids, dtype=np.int32))
        self._lengths.append(np.fromiter(map(len, docs_tokens), dtype=np.int64, count=len(docs_tokens)))

    def _consolidate(self) -> None:
        if self._parts:
            self._flat = np.concatenate([self._flat, *self._parts])
            lengths = np.concatenate(self._lengths)
            self._offsets = np.concatenate([self._offsets, self._offsets[-1] + np.cumsum(lengths)])
            self._parts, self._lengths = [], []

    def __len__(self) -> int:
        self._consolidate()
        return int(self._offsets.shape[0] - 1)

    @property
    def ids(self) -> TokenIdCorpus:
        return self

    def __getitem__(self, i: int) -> list[int]:
        self._consolidate()
        return self._flat[self._offsets[i] : self._offsets[i + 1]].tolist()  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[list[int]]:
        return (self[i] for i in range(len(self)))

    def token_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Every token id in passage order (T,) and the passages' offsets into it (n + 1,)."""
        self._consolidate()
        return self._flat, self._offsets


class BM25Index:
    def __init__(self, model: bm25s.BM25 | None, ids: np.ndarray, params: BM25Params) -> None:
        self.model = model  # None when the index holds no documents
        self.ids = ids  # (N,) int64 external id of each row
        self.params = params
        self._vocab: dict[str, int] = dict(model.vocab_dict) if model is not None else {}

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @classmethod
    def build(
        cls,
        corpus: list[list[str]] | TokenIdCorpus,
        ids: np.ndarray,
        params: BM25Params,
    ) -> BM25Index:
        """Index the passages with bm25s (the reference the segment postings are tested against, and the
        index the trainers' BM25 hard negatives come from)."""
        if not isinstance(corpus, TokenIdCorpus):
            tokens, corpus = corpus, TokenIdCorpus()
            corpus.add(tokens)
        ids = np.asarray(ids, dtype=np.int64)
        if len(corpus) != ids.shape[0]:
            raise ValueError(f"{len(corpus)} documents but {ids.shape[0]} ids")
        if len(corpus) == 0:
            return cls(None, ids, params)
        if not corpus.vocab:  # every passage is stopwords only: bm25s needs a vocabulary of at least one
            corpus.vocab[""] = 0
        method = "lucene" if params.method == "okapi" else params.method
        kwargs: dict[str, Any] = {
            "k1": params.k1,
            "b": params.b,
            "delta": params.delta,
            "method": method,
            "backend": "numba",
            "dtype": "float64" if params.method == "okapi" else "float32",
        }
        model = bm25s.BM25(**kwargs)
        with np.errstate(invalid="ignore", divide="ignore"):  # bm25l/bm25+ divide by a 0 mean length then
            model.index(corpus, show_progress=False)
        if params.method == "okapi":
            _okapi_reweight(model, len(corpus), params.k1, params.epsilon)
        return cls(model, ids, params)

    def save(self, directory: Path) -> None:
        if self.model is not None:
            self.model.save(str(directory), show_progress=False, allow_pickle=False)
        np.save(directory / IDS_FILE, self.ids, allow_pickle=False)
        meta = {**self.params.to_json(), "num_docs": len(self)}
        (directory / PARAMS_FILE).write_text(json.dumps(meta, indent=2))

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = True) -> BM25Index:
        meta = json.loads((directory / PARAMS_FILE).read_text())
        params = BM25Params.from_json(meta)
        ids = load_npy(directory / IDS_FILE)
        if ids.shape != (int(meta["num_docs"]),):
            raise ValueError(f"{directory}: {ids.shape[0]} ids for {meta['num_docs']} documents")
        if ids.shape[0] == 0:
            return cls(None, ids, params)
        model = bm25s.BM25.load(str(directory), mmap=mmap, allow_pickle=False, show_progress=False)
        model.backend = "numba"
        sc = model.scores
        if int(sc["num_docs"]) != ids.shape[0] or int(sc["indptr"][-1]) != sc["data"].shape[0]:
            raise ValueError(f"{directory}: BM25 matrix does not match its ids or vocabulary")
        return cls(model, ids, params)

    def search(self, query_tokens: list[list[str]], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: (ids, scores), best first, at most k, only documents that share a term with it."""
        empty = (np.empty(0, np.int64), np.empty(0, np.float32))
        k = min(k, len(self))
        if self.model is None or k == 0:
            return [empty for _ in query_tokens]
        known = [[self._vocab[t] for t in q if t in self._vocab] for q in query_tokens]
        rows = [i for i, q in enumerate(known) if q]
        out = [empty for _ in query_tokens]
        if not rows:
            return out
        docs, scores = self.model.retrieve(
            [known[i] for i in rows], k=k, show_progress=False, n_threads=1, return_as="tuple"
        )  # (nq, k) each
        for i, d, s in zip(rows, docs, scores, strict=True):
            keep = s > 0
            out[i] = (self.ids[d[keep]], s[keep].astype(np.float32))
        return out


def warm_up() -> None:
    """Compile bm25s's numba kernels now (about 7 s on 2 cores) rather than on the first user query."""
    docs = tokenize(["warm up the bm25 kernels", "another short document"])
    with tempfile.TemporaryDirectory() as tmp:
        # Through save and a memory-mapped load: read-only arrays are another numba signature.
        BM25Index.build(docs, np.arange(2), BM25Params()).save(Path(tmp))
        BM25Index.load(Path(tmp), mmap=True).search(tokenize(["warm kernels"]), 2)
