"""In-process scoring for `vela bench adapt`: the test queries searched on an eval collection as `vela eval`
ranks them, with a fusion override, and per-query paired differences between two collections.

(bench code imports nothing from cli/, so the few lines of ranking-as-scores that `vela eval` has live here too.)
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np

MEASURES = {"ndcg@10": ir_measures.nDCG @ 10, "recall@100": ir_measures.R @ 100, "mrr@10": ir_measures.RR @ 10}


@lru_cache(maxsize=4)
def _state(work: Path) -> Any:
    """One service state per work directory: its collections and embedders load once for every scoring."""
    from service.settings import Settings
    from service.state import build_state

    return build_state(Settings(data_dir=work, precision="bf16"))


def search_test_queries(work: Path, data: str, coll_name: str, mode: str, fusion: dict[str, Any] | None = None) -> Any:
    """(qrels, run) of the test queries searched in process on an eval collection, as `vela eval` ranks them
    (`fusion`: a request's override; None: the collection's own)."""
    from service.search import search_batch
    from velaio.beir import read_qrels, read_queries

    state = _state(work)
    coll = state.collections.get(coll_name)
    emb = state.embedders.get(coll.settings.embedder)
    qrels, queries = read_qrels(Path(data), "test"), read_queries(Path(data))
    qids = [q for q in qrels if q in queries]
    run: dict[str, dict[str, float]] = {}
    for start in range(0, len(qids), 64):
        batch = qids[start : start + 64]
        found = search_batch(
            collection=coll,
            embedder=emb,
            queries=[queries[q] for q in batch],
            k=100,
            mode=mode,  # type: ignore[arg-type]
            fusion=fusion,
        )
        for qid, res in zip(batch, found, strict=True):
            run[qid] = {h.id: float(len(res.hits) - i) for i, h in enumerate(res.hits)}  # ranks, as vela eval
    return qrels, run


def scores_with_fusion(work: Path, data: str, coll_name: str, fusion: dict[str, Any]) -> dict[str, float]:
    """Hybrid metrics of an eval collection with the fusion given (a request's override), as `vela eval` scores."""
    qrels, run = search_test_queries(work, data, coll_name, "hybrid", fusion)
    agg = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, run)
    return {name: round(float(agg[m]), 4) for name, m in MEASURES.items()}


def _per_query_ndcg(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """NDCG@10 of each judged query (a query the run misses: 0)."""
    got = {m.query_id: float(m.value) for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], qrels, run)}
    return {q: got.get(q, 0.0) for q in qrels}


def paired(work: Path, data: str, untrained: str, adapted: str, mode: str) -> dict[str, Any]:
    """Per-query NDCG@10, adapted minus untrained, on the same test queries: the mean difference, a bootstrap
    95% interval (10,000 resamples of the queries) and how many queries gained or lost: whether a difference
    is more than the noise of a few hundred queries."""
    qrels, a = search_test_queries(work, data, untrained, mode)
    _, b = search_test_queries(work, data, adapted, mode)
    qa, qb = _per_query_ndcg(qrels, a), _per_query_ndcg(qrels, b)
    d = np.array([qb.get(q, 0.0) - qa.get(q, 0.0) for q in qrels])  # (Q,)
    boot = d[np.random.default_rng(0).integers(0, len(d), (10_000, len(d)))].mean(axis=1)  # (10000,)
    return {
        "untrained": round(float(np.mean([qa.get(q, 0.0) for q in qrels])), 4),
        "adapted": round(float(np.mean([qb.get(q, 0.0) for q in qrels])), 4),
        "difference": round(float(d.mean()), 4),
        "ci95": [round(float(np.percentile(boot, 2.5)), 4), round(float(np.percentile(boot, 97.5)), 4)],
        "queries_better": int((d > 0).sum()),
        "queries_worse": int((d < 0).sum()),
        "queries": len(d),
    }
