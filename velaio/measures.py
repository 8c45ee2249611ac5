"""Retrieval measures over BEIR qrels, one definition for `vela eval`, the reindex gate and the benchmarks.

A run is qid -> {doc id: score}; ir-measures orders each query's documents by score (ties by doc id), so a run
built with `ranked_scores` is scored in exactly the order Vela returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ir_measures

Run = dict[str, dict[str, float]]
NDCG10 = ir_measures.nDCG @ 10
# What `vela eval` reports, by the names its results JSON uses.
MEASURES: dict[str, Any] = {"ndcg@10": NDCG10, "recall@100": ir_measures.R @ 100, "mrr@10": ir_measures.RR @ 10}


def ranked_scores(doc_ids: Sequence[str]) -> dict[str, float]:
    """Scores for documents in the order given, best first: n, n-1, ..., 1 (distinct, so the order is kept)."""
    return {d: float(len(doc_ids) - i) for i, d in enumerate(doc_ids)}


def score_run(
    qrels: Mapping[str, Mapping[str, int]], run: Run, measures: Mapping[str, Any] = MEASURES
) -> dict[str, float]:
    """Means over the qrels' queries (a query the run misses counts 0), rounded as the results JSON has them."""
    agg = ir_measures.calc_aggregate(list(measures.values()), qrels, run)
    return {name: round(float(agg[m]), 4) for name, m in measures.items()}


def per_query_ndcg(qrels: Mapping[str, Mapping[str, int]], run: Run) -> dict[str, float]:
    """NDCG@10 of each judged query (a query the run misses: 0)."""
    scores = {m.query_id: float(m.value) for m in ir_measures.iter_calc([NDCG10], qrels, run)}
    return {q: scores.get(q, 0.0) for q in qrels}
