"""A published manifest of one shard, loaded for searching: its segments, live rows and BM25 counts.

Everything a search needs is made here, when a manifest is loaded (by the background reader or a writer
that just published), never on a request: the FAISS IDSelector of each segment's live rows, each segment's
live document frequencies, lengths and counts. Segments unchanged since the previous manifest are reused.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from indexing import segment_search as plan
from indexing.bm25 import BM25Params
from indexing.facets import shard_counts as facet_counts
from indexing.filters import Node, Schema
from indexing.live_segment import BlockData, LiveSegment, Searchable, SegmentBlock, blockable, row_selector
from indexing.manifest import load_dead, read_manifest
from indexing.postings import TermStats, score_segments
from indexing.segment import Segment
from indexing.segment_search import Lists, exact_top, prefix_top, search_target
from models.cde.context import CorpusContext

SCAN_ROWS_KEPT = 50_000  # a narrowed segment keeps its passing row numbers up to this many (400 KB)
SINGLE_THREAD_BELOW = 8  # queries per call under which FAISS runs on the calling thread only
FILTER_CACHE = 64  # filters whose scopes a view keeps (about 2 bits a row each)
DOC_TABLE_SLACK = 4  # a passage -> document table when the largest id is under this many times the passages


@dataclass(frozen=True)
class Scope:
    """The rows one search may return: the view's live rows, or those of them that pass a filter.
    targets and parts mirror the view's (same order, same row numbering), with `live` narrowed."""

    targets: list[Searchable]
    parts: list[LiveSegment]
    row_live: np.ndarray  # (rows of the targets,) bool
    n: int


def _narrow(x: Any, mask: np.ndarray) -> Any:
    selector, bits = row_selector(mask)
    n = int(mask.sum())
    if isinstance(x, LiveSegment) and (n < plan.EXACT_SCAN_SHARE * mask.shape[0] or n <= SCAN_ROWS_KEPT):
        # the rows an exact scan will read, found once per cached filter rather than on every query
        return replace(x, live=mask, n_live=n, selector=selector, bits=bits, rows=np.flatnonzero(mask))
    return replace(x, live=mask, n_live=n, selector=selector, bits=bits)


class ShardView:
    def __init__(
        self,
        version: int,
        manifest: dict[str, Any],
        parts: list[LiveSegment],
        context: CorpusContext | None,
        previous: BlockData | None = None,
    ) -> None:
        self.version, self.manifest, self.parts, self.context = version, manifest, parts, context
        self.bm25_params = BM25Params.from_json(manifest["bm25"])
        self.n_live = sum(p.n_live for p in parts)
        self.total_len = sum(p.total_len for p in parts)
        self._all_df: dict[str, int] | None = None
        # What full-dim dense and BM25 search go over: the small flat segments as one block, the rest alone.
        small = blockable(parts)
        self.block = SegmentBlock.make(small, previous) if small else None
        in_block = {id(p) for p in small}
        rest: list[Searchable] = [p for p in parts if p.n_live and id(p) not in in_block]
        self.targets: list[Searchable] = [*([self.block] if self.block else []), *rest]
        self._block_parts = small
        # passage -> document number over every segment, for grouping hits by document
        pids = np.concatenate([p.seg.pids for p in parts]) if parts else np.empty(0, np.int64)
        docs = np.concatenate([p.seg.docs for p in parts]) if parts else np.empty(0, np.int64)
        order = np.argsort(pids, kind="stable")
        self._pids, self._docs = pids[order], docs[order]
        # Passage ids are dense in a shard that has not been rewritten much: then a table indexed by id answers
        # doc_numbers with one gather instead of a binary search per id (~50 µs for a hybrid list of 600).
        span = int(self._pids[-1]) + 1 if self._pids.shape[0] and self._pids[0] >= 0 else 0
        self._doc_of: np.ndarray | None = None
        if 0 < span <= DOC_TABLE_SLACK * self._pids.shape[0]:
            self._doc_of = np.zeros(span, dtype=self._docs.dtype)
            self._doc_of[self._pids] = self._docs
        # The targets' rows numbered one after another, for BM25 over all of them in one pass.
        t = self.targets
        self._bases = np.cumsum([0] + [len(x.pids) for x in t[:-1]]).astype(np.int64) if t else np.empty(0, np.int64)
        self._row_pid = np.concatenate([x.pids for x in t]) if t else np.empty(0, np.int64)
        self._row_live = np.concatenate([x.live for x in t]) if t else np.empty(0, bool)
        self._row_len = np.concatenate([x.postings.lengths for x in t]).astype(np.float64) if t else np.empty(0)
        self.schema = Schema.from_json(manifest.get("schema"))
        self.scope = Scope(self.targets, self.parts, self._row_live, self.n_live)
        self._filter_cache: OrderedDict[bytes, Scope] = OrderedDict()
        self._filter_lock = threading.Lock()

    @classmethod
    def load(
        cls, directory: Path, version: int, reuse: Sequence[Segment] = (), block: BlockData | None = None
    ) -> ShardView:
        """The view of manifest `version`; segments in `reuse` are not read again, and `block` (the previous
        view's) is extended rather than copied again when it holds the same small segments."""
        manifest = read_manifest(directory, version)
        ef = manifest.get("dense_index", {}).get("ef_search")
        known = {s.name: s for s in reuse}
        parts = []
        fields = Schema.from_json(manifest.get("schema")).fields
        for e in manifest["segments"]:
            seg = known.get(e["name"]) or Segment.load(directory / e["name"], ef_search=ef)
            seg.payload.index(fields)  # the declared fields' columns, built once per segment
            seg.payload.index_undeclared(fields)  # and the undeclared ones': a filter finds every column ready
            parts.append(LiveSegment.make(seg, load_dead(directory, e)))
        ctx = manifest.get("context")
        context = CorpusContext.load(directory / f"ctx-{ctx}") if ctx else None
        view = cls(version, manifest, parts, context, block)
        if view.bm25_params.method == "okapi":
            view.all_df()  # okapi's idf floor needs every term's df: counted now, not on a query
        return view

    @property
    def seq(self) -> int:
        """The doc store's change counter this manifest reflects."""
        return int(self.manifest["seq"])

    @property
    def segments(self) -> list[Segment]:
        return [p.seg for p in self.parts]

    # --- filters -----------------------------------------------------------------------------------
    def scope_for(self, node: Node | None) -> Scope:
        """The live rows that pass the filter (the view's own scope when there is none). The scopes of the
        FILTER_CACHE most recent filters are kept with the view, as Elasticsearch caches filter bitsets per
        segment: tenants and sources repeat from query to query, and a view lives until the next publish."""
        if node is None:
            return self.scope
        # A digest of the node's repr, not the node itself (True == 1 in Python, and a filter must not mistake one
        # for the other), nor the repr (a filter within the limits can be megabytes of text; 64 kept per view).
        key = hashlib.blake2b(repr(node).encode(), digest_size=16).digest()
        with self._filter_lock:
            scope = self._filter_cache.get(key)
            if scope is not None:
                self._filter_cache.move_to_end(key)
                return scope
        scope = self._scope_uncached(node)
        with self._filter_lock:
            self._filter_cache[key] = scope
            while len(self._filter_cache) > FILTER_CACHE:
                self._filter_cache.popitem(last=False)
        return scope

    def _scope_uncached(self, node: Node) -> Scope:
        fields = self.schema.fields
        masks = {id(p): p.live & p.seg.payload.mask(node, fields, p.seg.docs) for p in self.parts}
        parts = [_narrow(p, masks[id(p)]) for p in self.parts]
        targets: list[Searchable] = []
        for t in self.targets:
            if t is self.block:
                targets.append(_narrow(t, np.concatenate([masks[id(p)] for p in self._block_parts])))
            else:
                targets.append(_narrow(t, masks[id(t)]))
        row_live = np.concatenate([t.live for t in targets]) if targets else np.empty(0, bool)
        return Scope(targets, parts, row_live, int(row_live.sum()))

    def count(self, node: Node | None) -> int:
        """Documents with a live passage that passes the filter."""
        scope = self.scope_for(node)
        docs = [p.seg.docs[p.live] for p in scope.parts]
        return int(np.unique(np.concatenate(docs)).shape[0]) if docs else 0

    def facet(self, node: Node | None, key: str, kind: str) -> dict[Any, int]:
        """value -> documents with a live passage that passes the filter and hold the value."""
        return facet_counts(self.scope_for(node).parts, key, kind)

    # --- BM25 statistics -----------------------------------------------------------------------
    def term_stats(self, terms: set[str]) -> TermStats:
        df: dict[str, int] = {}
        for p in self.targets:
            vocab = p.postings.vocab
            for t in terms:
                i = vocab.get(t)
                if i is not None and p.live_df[i]:
                    df[t] = df.get(t, 0) + int(p.live_df[i])
        return TermStats(self.n_live, self.total_len, df)

    def all_df(self) -> dict[str, int]:
        if self._all_df is None:
            out: dict[str, int] = {}
            for p in self.targets:
                terms = p.postings.terms
                for t, c in zip(terms, p.live_df[: len(terms)].tolist(), strict=True):
                    if c:
                        out[t] = out.get(t, 0) + c
            self._all_df = out
        return self._all_df

    # --- retrieval: every list is over live rows only, merged by (score desc, passage id) ---------
    def dense(self, qv: np.ndarray, f: int, small: bool, rescore_factor: int, scope: Scope | None = None) -> Lists:
        """Top f passages per query by full-dim cosine (float64 sums: independent of the segment sizes).
        small: the Matryoshka prefix index makes a shortlist of rescore_factor x f over all segments, merged,
        which the full vectors then rank (rescore_factor 0: the prefix index's own ranking and cosines)."""
        q = np.ascontiguousarray(qv, dtype=np.float32)  # (nq, d)
        scope = scope or self.scope
        if q.shape[0] < SINGLE_THREAD_BELOW:
            # OpenMP's thread count is per calling thread: this search thread alone runs FAISS on one thread.
            # A few queries gain nothing from a second one, and on a busy machine waking it costs milliseconds
            # (measured: a 100k flat search at 190 ms with the default threads under load).
            faiss.omp_set_num_threads(1)
        if not small:
            targets = [t for t in scope.targets if t.n_live]
            found = [search_target(t, t.full, q, min(f, t.n_live)) for t in targets]
            return exact_top(targets, found, q, f)
        parts = [p for p in scope.parts if p.n_live]
        return prefix_top(parts, q, f, rescore_factor, int(self.manifest["small_dim"]))

    def bm25(
        self, queries: Sequence[list[str]], stats: TermStats, scope: Scope | None = None, cut: int | None = None
    ) -> Lists:
        """Every live passage (in scope) that shares a term with the query and scores above 0, best first; with
        `cut`, only those scoring at least the cut-th best score (ties at the cut included, so the list is exact
        as far as it goes, and only it is sorted). A filter narrows the rows, not the statistics: scores are
        those of the unfiltered collection."""
        row_live = (scope or self.scope).row_live
        postings = [p.postings for p in self.targets]
        out: Lists = []
        for tokens in queries:
            rows, scores = score_segments(postings, self._bases, self._row_len, tokens, stats, self.bm25_params)
            keep = row_live[rows] & (scores > 0)
            pids, sc = self._row_pid[rows[keep]], scores[keep].astype(np.float32)
            if cut is not None and sc.shape[0] > cut:
                best = sc >= np.partition(sc, -cut)[-cut]
                pids, sc = pids[best], sc[best]
            order = np.lexsort((pids, -sc))
            out.append((pids[order], sc[order]))
        return out

    def doc_numbers(self, pids: np.ndarray) -> np.ndarray:
        """Document number of each passage id (every id asked for is in one of this view's segments)."""
        if self._doc_of is not None:
            return self._doc_of[pids]  # type: ignore[no-any-return]
        return self._docs[np.searchsorted(self._pids, pids)]  # type: ignore[no-any-return]
