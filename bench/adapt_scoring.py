"""In-process scoring for `vela bench adapt`: the test queries searched on an eval collection as `vela eval`
ranks them, with a fusion override, and per-query paired differences between two collections.

Runs are built and scored as `vela eval` builds and scores them (velaio/measures.py).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from velaio.measures import per_query_ndcg, ranked_scores, score_run


@lru_cache(maxsize=4)
def _state(work: Path, precision: str, encoder: str) -> Any:
    """One service state per work directory (and encoder form): its collections and embedders load once."""
    from service.settings import Settings
    from service.state import build_state

    return build_state(Settings(data_dir=work, precision=precision, encoder=encoder))


def search_test_queries(
    work: Path,
    data: str,
    coll_name: str,
    mode: str,
    fusion: dict[str, Any] | None = None,
    *,
    precision: str = "bf16",
    encoder: str = "auto",
) -> Any:
    """(qrels, run) of the test queries searched in process on an eval collection, as `vela eval` ranks them
    (`fusion`: a request's override; None: the collection's own; `precision`, `encoder`: the serving settings)."""
    from service.search import search_batch
    from velaio.beir import read_qrels, read_queries

    state = _state(work, precision, encoder)
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
            run[qid] = ranked_scores([h.id for h in res.hits])
    return qrels, run


def scores_with_fusion(
    work: Path, data: str, coll_name: str, fusion: dict[str, Any], **serving: str
) -> dict[str, float]:
    """Hybrid metrics of an eval collection with the fusion given (a request's override), as `vela eval` scores."""
    qrels, run = search_test_queries(work, data, coll_name, "hybrid", fusion, **serving)
    return score_run(qrels, run)


def paired(work: Path, data: str, untrained: str, adapted: str, mode: str) -> dict[str, Any]:
    """Per-query NDCG@10, adapted minus untrained, on the same test queries: the mean difference, a bootstrap
    95% interval (10,000 resamples of the queries) and how many queries gained or lost: whether a difference
    is more than the noise of a few hundred queries."""
    qrels, a = search_test_queries(work, data, untrained, mode)
    _, b = search_test_queries(work, data, adapted, mode)
    qa, qb = per_query_ndcg(qrels, a), per_query_ndcg(qrels, b)
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
