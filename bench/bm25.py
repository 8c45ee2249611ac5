"""Our BM25 (bm25s, numba) against `rank_bm25.BM25Okapi` on SciFact: index time, queries/s, top-10 agreement.

Both get the same tokens (indexing.bm25.tokenize of title + text, and of each query; tokenising is timed
apart and counted in neither) and the same Okapi parameters (k1 1.5, b 0.75, epsilon 0.25: rank_bm25's
defaults). rank_bm25 answers one query per call (`get_scores`, then the top 10 of its dense score array), so
the headline `ours_qps` is ours one query per `BM25Index.search` call too; ours with all queries in one call is
`ours_batch_qps`. Agreement: "exact" needs the same 10 ids in the same order; "up to ties" accepts any order
among equal scores (each of our ids carries rank_bm25's own score for it, and the 10 scores match rank by rank).

    python -m bench.bm25 --data ../shared/data/beir/scifact --out bench/results/bm25.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from bench.common import command, machine, write_result

REPO = Path(__file__).resolve().parents[1]
K = 10
RTOL = 1e-5  # ours are float32 on output, rank_bm25's float64
T = TypeVar("T")


def load(data: Path) -> tuple[list[str], list[str]]:
    with open(data / "corpus.jsonl") as f:
        docs = [json.loads(line) for line in f]
    with open(data / "queries.jsonl") as f:
        queries = [json.loads(line)["text"] for line in f]
    return [f"{d.get('title') or ''}\n{d['text']}" for d in docs], queries


def rank_bm25_top(model: Any, query: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rank_bm25's top-K (rows, scores) among documents that share a term, and its score of every document."""
    scores = model.get_scores(query)  # (N,) float64, every document
    top = np.argsort(-scores, kind="stable")[:K]
    top = top[scores[top] > 0]  # ours returns only documents that share a term with the query
    return top, scores[top], scores


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared/data/beir/scifact")
    ap.add_argument("--queries", type=int, default=0, help="use the first N queries (0: all)")
    ap.add_argument("--repeats", type=int, default=3, help="our timed passes over the queries (best is kept)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/bm25.json"))
    args = ap.parse_args(argv)

    from rank_bm25 import BM25Okapi

    from indexing.bm25 import BM25Index, BM25Params, tokenize, warm_up

    texts, query_texts = load(args.data)
    if args.queries:
        query_texts = query_texts[: args.queries]
    t0 = time.perf_counter()
    doc_tokens, query_tokens = tokenize(texts), tokenize(query_texts)
    tokenize_s = time.perf_counter() - t0

    warm_up()  # numba compiles once per process (seconds): not a cost of indexing or of a query
    params = BM25Params(method="okapi", k1=1.5, b=0.75, epsilon=0.25)
    ours, ours_index_s = timed(lambda: BM25Index.build(doc_tokens, np.arange(len(texts)), params))
    theirs, theirs_index_s = timed(lambda: BM25Okapi(doc_tokens, k1=1.5, b=0.75, epsilon=0.25))
    ours.search(query_tokens[:2], K)  # the first call on a fresh index pays a little set-up

    # Ours, one query per call (the comparison with rank_bm25) and all queries in one call; best of repeats.
    one_s = min(timed(lambda: [ours.search([q], K) for q in query_tokens])[1] for _ in range(args.repeats))
    batch_s = min(timed(lambda: ours.search(query_tokens, K))[1] for _ in range(args.repeats))
    our_hits = ours.search(query_tokens, K)
    their_hits, theirs_s = timed(lambda: [rank_bm25_top(theirs, q) for q in query_tokens])

    exact = ties = 0
    max_diff = 0.0
    for (our_ids, our_scores), (their_ids, their_scores, all_scores) in zip(our_hits, their_hits, strict=True):
        exact += int(np.array_equal(our_ids, their_ids))
        same_len = len(our_ids) == len(their_ids)
        ok = same_len and np.allclose(our_scores, their_scores, rtol=RTOL, atol=0)
        ok = ok and np.allclose(our_scores, all_scores[our_ids], rtol=RTOL, atol=0)
        ties += int(ok)
        if len(our_ids):
            max_diff = max(max_diff, float(np.max(np.abs(our_scores - all_scores[our_ids]) / all_scores[our_ids])))

    nq = len(query_tokens)
    ours_qps, batch_qps, theirs_qps = nq / one_s, nq / batch_s, nq / theirs_s
    write_result(
        args.out,
        {
            "docs": len(texts),
            "queries": nq,
            "ours_qps": round(ours_qps, 1),
            "rank_bm25_qps": round(theirs_qps, 2),
            "ratio": round(ours_qps / theirs_qps, 1),
            "top10_agreement": round(exact / nq, 4),
            "top10_agreement_up_to_ties": round(ties / nq, 4),
            "headline": "ours_qps: one query per BM25Index.search call, as rank_bm25 answers them",
            "ours_batch_qps": round(batch_qps, 1),
            "batch_ratio": round(batch_qps / theirs_qps, 1),
            "ours_index_s": round(ours_index_s, 3),
            "rank_bm25_index_s": round(theirs_index_s, 3),
            "index_ratio": round(theirs_index_s / ours_index_s, 1),
            "tokenize_s": round(tokenize_s, 3),
            "max_relative_score_diff": max_diff,
            "params": params.to_json(),
            "data": str(args.data),
            "machine": machine(),
            "command": command(),
        },
    )


if __name__ == "__main__":
    main()
