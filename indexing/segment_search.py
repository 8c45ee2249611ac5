"""Dense search over one shard view's segments: the planner that picks a filtered HNSW walk or an exact scan,
the exact top f across segments, and the Matryoshka prefix shortlist.

Every list is over live rows only (and, with a filter, the rows that pass it), merged by (score desc, passage id),
so a result does not depend on how the shard happens to be cut into segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import faiss
import numpy as np

from indexing.dense import exact_scores, search
from indexing.live_segment import LiveSegment, Searchable, SegmentBlock, scan_rows, search_params
from models.embedder.modeling_embedder import truncate_embeddings

Lists = list[tuple[np.ndarray, np.ndarray]]  # per query: (passage ids, scores), best first
SCORE_SLACK = 1e-3  # FAISS's float32 inner products of unit vectors err by ~1e-6: a wide margin
# The planner, as Qdrant's picks between a filtered graph walk and a scan by the filter's cardinality. An HNSW
# segment's searched rows (live, and passing the filter) are scanned exactly when they are fewer than
# EXACT_SCAN_SHARE of its rows, or fewer than the distances the walk would compute (about ef x the 2M
# neighbours of a node on the graph's base layer): then the scan costs no more and misses nothing. Otherwise
# the walk takes the filter as a selector, with a candidate list widened as the share falls (a filtered walk
# visits more nodes per hit). FAISS scans only the passing rows (knn_inner_products_by_idx).
# Measured on 100k MiniLM vectors (m 32, one thread): the scan of 5 % takes 0.27 ms; at 10 % the walk at ef 128
# finds 99.2 % of the true top 10 in 0.34 ms, where a 201-deep list (hybrid) needs the scan: the walk at ef 402
# finds 96.6 % of the fused top 10.
EXACT_SCAN_SHARE = 0.06
EF_WIDEN_BELOW = 0.1  # shares under this widen ef by 0.1 / share, at most EF_WIDEN_MAX times
EF_WIDEN_MAX = 2.0


def search_target(
    p: LiveSegment | SegmentBlock, index: faiss.Index, q: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """FAISS's (scores, rows) of the top k of `p`'s searched rows in `index` (its full or prefix index)."""
    if p.selector is None:
        return search(index, q, k)
    hnsw = getattr(index, "hnsw", None)
    if hnsw is not None:
        share = p.n_live / max(len(p.pids), 1)
        ef = int(max(k, hnsw.efSearch) * min(EF_WIDEN_MAX, max(1.0, EF_WIDEN_BELOW / share)))
        if share < EXACT_SCAN_SHARE or p.n_live < ef * hnsw.nb_neighbors(0):  # the scan beats the walk
            storage: Any = faiss.downcast_index(index.storage)  # type: ignore[attr-defined]
            if isinstance(storage, faiss.IndexFlat) and storage.metric_type == faiss.METRIC_INNER_PRODUCT:
                rows = p.rows if isinstance(p, LiveSegment) and p.rows is not None else np.flatnonzero(p.live)
                return scan_rows(storage, q, rows, k)
            # the prefix index's storage is fp16 scalar-quantised: a scan with the selector
            return storage.search(q, k, params=search_params(storage, p.selector, k))  # type: ignore[no-any-return]
        return index.search(q, k, params=search_params(index, p.selector, ef))  # type: ignore[call-arg,no-any-return]
    return index.search(q, k, params=p.params(index, k))  # type: ignore[call-arg,no-any-return]


def exact_top(parts: Sequence[Searchable], found: list[tuple[np.ndarray, np.ndarray]], q: np.ndarray, f: int) -> Lists:
    """Per query, the top f of every segment's candidates by exact float64 cosine. Only candidates whose
    FAISS score comes within SCORE_SLACK of the f-th best are rescored: FAISS's float32 scores are off by
    far less than that, so no candidate of the exact top f is skipped, and ten segments rescore about as
    many rows as one."""
    out: Lists = []
    for qi in range(q.shape[0]):
        seg_of, rows_l, approx_l = [], [], []
        for i, (scores, rows) in enumerate(found):
            r = rows[qi]
            ok = r >= 0  # HNSW answers -1 where it found fewer rows than asked
            seg_of.append(np.full(int(ok.sum()), i))
            rows_l.append(r[ok])
            approx_l.append(scores[qi][ok])
        seg = np.concatenate(seg_of) if seg_of else np.empty(0, np.int64)
        rows = np.concatenate(rows_l) if rows_l else np.empty(0, np.int64)
        approx = np.concatenate(approx_l) if approx_l else np.empty(0, np.float32)
        if approx.shape[0] > f:
            keep = approx >= np.partition(approx, -f)[-f] - SCORE_SLACK
            seg, rows = seg[keep], rows[keep]
        pids = np.empty(rows.shape[0], np.int64)
        exact = np.empty(rows.shape[0], np.float32)
        for i in np.unique(seg).tolist():
            mine = seg == i
            p = parts[i]
            pids[mine] = p.pids[rows[mine]]
            exact[mine] = exact_scores(p.vectors(rows[mine])[None], q[qi : qi + 1])[0]
        order = np.lexsort((pids, -exact))[:f]
        out.append((pids[order], exact[order]))
    return out


def prefix_top(parts: Sequence[LiveSegment], q: np.ndarray, f: int, rescore_factor: int, small_dim: int) -> Lists:
    """The Matryoshka prefix index's shortlist of rescore_factor x f over all segments, merged, ranked by the
    full vectors (rescore_factor 0: the prefix index's own ranking and cosines)."""
    s = max(f * rescore_factor, f)
    qs = truncate_embeddings(q, small_dim)  # (nq, small_dim)
    found = [search_target(p, p.seg.small, qs, min(s, p.n_live)) for p in parts]
    if rescore_factor == 0:
        lists = [
            [(p.seg.pids[r[r >= 0]], sc[r >= 0]) for r, sc in zip(rows, scores, strict=True)]
            for p, (scores, rows) in zip(parts, found, strict=True)
        ]
        return merge_lists(lists, len(q), f)
    # The shortlist is the top s of every segment's prefix scores together, as one index's would be.
    tagged = []  # per segment, per query: ((segment, row) pairs, passage ids, prefix scores)
    for i, (p, (scores, rows)) in enumerate(zip(parts, found, strict=True)):
        per_q = []
        for r, sc in zip(rows, scores, strict=True):
            r = r[r >= 0]
            per_q.append((np.stack([np.full(r.shape[0], i), r], 1), p.seg.pids[r], sc[: r.shape[0]]))
        tagged.append(per_q)
    out: Lists = []
    for qi in range(len(q)):
        where = np.concatenate([t[qi][0] for t in tagged]) if tagged else np.empty((0, 2), np.int64)
        pids = np.concatenate([t[qi][1] for t in tagged]) if tagged else np.empty(0, np.int64)
        sc = np.concatenate([t[qi][2] for t in tagged]) if tagged else np.empty(0, np.float32)
        keep = np.lexsort((pids, -sc))[:s]
        vecs = np.empty((keep.shape[0], q.shape[1]), np.float32)
        for i, p in enumerate(parts):
            mine = where[keep, 0] == i
            if mine.any():
                vecs[mine] = p.seg.vectors(where[keep[mine], 1])
        full = exact_scores(vecs[None], q[qi : qi + 1])[0]  # (s,)
        order = np.lexsort((pids[keep], -full))[:f]
        out.append((pids[keep][order], full[order]))
    return out


def merge_lists(per_segment: Sequence[Lists], nq: int, f: int | None) -> Lists:
    """Per query: the segments' lists merged by (score desc, passage id), cut to f (None: all)."""
    out = []
    for qi in range(nq):
        pids = np.concatenate([s[qi][0] for s in per_segment]) if per_segment else np.empty(0, np.int64)
        scores = np.concatenate([s[qi][1] for s in per_segment]) if per_segment else np.empty(0, np.float32)
        order = np.lexsort((pids, -scores))[:f]
        out.append((pids[order], scores[order]))
    return out
