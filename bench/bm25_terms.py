"""BM25 with single-letter and single-digit terms (`min_token_chars` 1) against the default (2, bm25s's pattern):
NDCG@10 and R@100 on SciFact, Cranfield and CoSQA-dev, each document indexed whole (title + text) with the
product's tokenizer and BM25 (indexing.bm25: lucene, k1 1.2, b 0.75), the test qrels' queries.

    vela bench bm25-terms --out bench/results/bm25-terms.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np
from ir_measures import R, nDCG

from bench.common import command, machine, write_result
from indexing.bm25 import BM25Index, BM25Params, tokenize
from velaio.beir import read_corpus, read_qrels, read_queries

REPO = Path(__file__).resolve().parents[1]
DATASETS = ("scifact", "cranfield", "cosqa-dev")


def scores(root: Path, min_chars: int, normalize: str = "none") -> dict[str, float]:
    docs = list(read_corpus(root))
    qrels = read_qrels(root, "test")
    queries = {q: t for q, t in read_queries(root).items() if q in qrels}
    index = BM25Index.build(
        tokenize([f"{d['title']} {d['text']}" for d in docs], min_chars=min_chars, normalize=normalize),
        np.arange(len(docs)),
        BM25Params(min_token_chars=min_chars, normalize=normalize),
    )
    qids = list(queries)
    found = index.search(tokenize([queries[q] for q in qids], min_chars=min_chars, normalize=normalize), 100)
    run = {
        q: {docs[int(i)]["id"]: float(s) for i, s in zip(ids, sc, strict=True)}
        for q, (ids, sc) in zip(qids, found, strict=True)
    }
    measured = ir_measures.calc_aggregate([nDCG @ 10, R @ 100], qrels, run)
    return {"ndcg@10": round(measured[nDCG @ 10], 4), "recall@100": round(measured[R @ 100], 4)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beir", type=Path, default=REPO.parent / "shared/data/beir")
    ap.add_argument("--out", type=Path, default=Path("bench/results/bm25-terms.json"))
    args = ap.parse_args(argv)
    per: dict[str, Any] = {}
    for name in DATASETS:
        two, one = scores(args.beir / name, 2), scores(args.beir / name, 1)
        per[name] = {
            "min_token_chars_2": two,
            "min_token_chars_1": one,
            "ndcg@10_delta": round(one["ndcg@10"] - two["ndcg@10"], 4),
        }
    deltas = [p["ndcg@10_delta"] for p in per.values()]
    write_result(
        args.out,
        {
            "command": command(),
            "what": "BM25 NDCG@10 with terms of 1+ characters against 2+ (the default), documents indexed whole",
            "datasets": per,
            "mean_ndcg@10_delta": round(float(np.mean(deltas)), 4),
            "machine": machine(),
        },
    )


if __name__ == "__main__":
    main()
