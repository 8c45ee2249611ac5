"""BM25 over NFKC-normalised text (`bm25.normalize` "nfkc", the default of new collections) against the text as
it is ("none", collections made before the setting): NDCG@10 and R@100 on SciFact, Cranfield and CoSQA-dev, each
document indexed whole with the product's tokenizer and BM25 (bench/bm25_terms.py's `scores`), and how many
documents and queries NFKC changes at all.

    vela bench bm25-normalize --out bench/results/bm25-normalize.json
"""

from __future__ import annotations

import argparse
import time
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

from bench.bm25_terms import DATASETS, REPO, scores
from bench.common import command, machine, write_result
from indexing.bm25 import tokenize
from velaio.beir import read_corpus, read_queries


def changed(root: Path) -> dict[str, int]:
    """Documents and queries whose text NFKC changes."""
    docs = [f"{d['title']} {d['text']}" for d in read_corpus(root)]
    queries = list(read_queries(root).values())
    count = sum(unicodedata.normalize("NFKC", t) != t for t in docs)
    return {
        "documents": len(docs),
        "documents_changed": count,
        "queries_changed": sum(unicodedata.normalize("NFKC", q) != q for q in queries),
    }


def tokenize_seconds(root: Path, normalize: str, rounds: int = 5) -> float:
    """Median seconds to tokenize the corpus (normalisation included), over `rounds`."""
    docs = [f"{d['title']} {d['text']}" for d in read_corpus(root)]
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        tokenize(docs, normalize=normalize)
        times.append(time.perf_counter() - t)
    return round(float(np.median(times)), 4)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beir", type=Path, default=REPO.parent / "shared/data/beir")
    ap.add_argument("--out", type=Path, default=Path("bench/results/bm25-normalize.json"))
    args = ap.parse_args(argv)
    per: dict[str, Any] = {}
    for name in DATASETS:
        none, nfkc = scores(args.beir / name, 2, "none"), scores(args.beir / name, 2, "nfkc")
        per[name] = {
            "none": none,
            "nfkc": nfkc,
            "ndcg@10_delta": round(nfkc["ndcg@10"] - none["ndcg@10"], 4),
            **changed(args.beir / name),
        }
    deltas = [p["ndcg@10_delta"] for p in per.values()]
    cost = {mode: tokenize_seconds(args.beir / "scifact", mode) for mode in ("none", "nfkc")}
    cost["ratio"] = round(cost["nfkc"] / cost["none"], 3)
    write_result(
        args.out,
        {
            "command": command(),
            "what": "BM25 NDCG@10 over NFKC-normalised text against the text as it is, documents indexed whole",
            "datasets": per,
            "mean_ndcg@10_delta": round(float(np.mean(deltas)), 4),
            "scifact_tokenize_seconds": cost,
            "machine": machine(),
        },
    )


if __name__ == "__main__":
    main()
