"""Training groups: a query, its positive, and negatives sampled from BM25's top-k (RankMamba §3.4).

BM25 is the project's own index (indexing/bm25.py, the service's tokenizer and default Lucene scoring)
over the dataset's documents, so the negatives are the near misses a Vela first stage really returns.
The groups are drawn once with a fixed seed and stay the same for the whole run.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset

# training may import indexing (the import contracts in pyproject.toml forbid only service and cli): the
# engine's own BM25 picks the hard negatives, as training/data/hard_negatives.py does for the embedders.
from indexing.bm25 import BM25Index, BM25Params, tokenize
from models.reranker.processing_reranker import document_text
from training.reranker.arguments import DataArguments
from velaio.beir import read_corpus, read_qrels, read_queries

log = logging.getLogger("vela.training.reranker")


@dataclass(frozen=True)
class Group:
    query: str
    documents: tuple[str, ...]  # the positive first, then the negatives


def bm25_candidates(doc_texts: list[str], queries: list[str], depth: int) -> list[np.ndarray]:
    """Per query: row numbers of its BM25 top-`depth` documents, best first."""
    index = BM25Index.build(tokenize(doc_texts), np.arange(len(doc_texts)), BM25Params())
    return [ids for ids, _ in index.search(tokenize(queries), depth)]


def build_groups(args: DataArguments, *, seed: int) -> tuple[list[Group], dict[str, Any]]:
    """The training groups, and what went into them (saved with the model)."""
    root = Path(args.data)
    docs = list(read_corpus(root))
    doc_ids = [d["id"] for d in docs]
    texts = [document_text(d["title"], d["text"]) for d in docs]
    row = {d: i for i, d in enumerate(doc_ids)}
    queries = read_queries(root)
    qrels = read_qrels(root, args.split)
    qids = [q for q in qrels if q in queries and any(g > 0 and d in row for d, g in qrels[q].items())]
    dev: list[str] = []
    if args.dev_queries:
        if args.dev_queries >= len(qids):
            raise ValueError(f"dev_queries={args.dev_queries} leaves no query to train on (of {len(qids)})")
        # A draw of its own (not the negatives' rng), so the held-out set does not move with other options.
        dev = sorted(random.Random(f"dev:{seed}").sample(qids, args.dev_queries))
        held_out = set(dev)
        qids = [q for q in qids if q not in held_out]
    if args.max_queries is not None:
        qids = qids[: args.max_queries]
    if not qids:
        raise ValueError(f"no {args.split} query of {root} has a relevant document in the corpus")

    candidates = bm25_candidates(texts, [queries[q] for q in qids], args.bm25_depth)
    rng = random.Random(seed + args.data_seed_offset)
    groups: list[Group] = []
    padded = 0  # groups whose BM25 list was too short, topped up with random documents
    for qid, cands in zip(qids, candidates, strict=True):
        relevant = {row[d] for d, g in qrels[qid].items() if d in row and g > 0}
        pool = [int(c) for c in cands.tolist() if int(c) not in relevant]
        for pos in sorted(relevant):
            for _ in range(args.samples_per_qrel):
                if len(pool) >= args.negatives:
                    negs = rng.sample(pool, args.negatives)
                else:  # every group must have the same size: top up with random non-relevant documents
                    padded += 1
                    rest = [i for i in range(len(texts)) if i not in relevant and i not in set(pool)]
                    if len(pool) + len(rest) < args.negatives:
                        raise ValueError(f"the corpus has too few documents for {args.negatives} negatives")
                    negs = pool + rng.sample(rest, args.negatives - len(pool))
                groups.append(Group(queries[qid], tuple(texts[i] for i in [pos, *negs])))
    stats = {
        "data": str(root),
        "split": args.split,
        "documents": len(docs),
        "queries": len(qids),
        "groups": len(groups),
        "group_size": 1 + args.negatives,
        "groups_topped_up_randomly": padded,
        "dev_query_ids": dev,
    }
    log.info("training groups", extra=stats)
    return groups, stats


class GroupDataset(Dataset[Group]):
    def __init__(self, groups: list[Group]) -> None:
        self.groups = groups

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, i: int) -> Group:
        return self.groups[i]


__all__ = ["Group", "GroupDataset", "bm25_candidates", "build_groups"]
