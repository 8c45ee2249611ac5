"""Pseudo-labelled training data for `vela adapt`: what the teacher says about each pseudo-query.

The engine side (cli/adapt_queries.py) cuts pseudo-queries out of the collection's documents and searches each with
dense and BM25; what arrives here is plain data, one `Candidates` per pseudo-query. This module turns it into
pseudo-labels without labels:

- teacher score t(q, d) = alpha * z(dense) + (1 - alpha) * z(BM25), z-scores over the query's candidates (the
  normalised convex combination of docs/fusion.md; z-scores keep margins in comparable units across queries);
- consistency filtering (InPars, Promptagator): keep a pseudo-query only if the teacher ranks its source in
  its top k;
- negatives: the teacher's best candidates below its top `skip_top` (GPL mines from the retriever's top 50;
  the very top is where false negatives sit), each with t(q, p) - t(q, n) for margin-MSE.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

log = logging.getLogger("vela.adapt")


@dataclass
class Candidates:
    """One pseudo-query as the teacher's two lists see it. Row 0 of `dense` and `bm25` is the positive (the
    source passage without the query sentence); rows 1.. are `texts`, other documents. NaN: not in that list."""

    query: str
    positive: str
    doc_id: str
    texts: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    dense: np.ndarray = field(default_factory=lambda: np.zeros(1))  # (1 + C,)
    bm25: np.ndarray = field(default_factory=lambda: np.zeros(1))  # (1 + C,)


@dataclass
class Example:
    query: str
    positive: str
    doc_id: str
    negatives: list[str]  # the mining pool, teacher order best first (empty: in-batch negatives only)
    negative_ids: list[str]
    margins: np.ndarray  # (len(negatives),) t(q, p) - t(q, n), teacher units


def zscore(x: np.ndarray) -> np.ndarray:
    """(x - mean) / std over the known values; a missing value (NaN: below a list's cut) gets the list's minimum,
    the closest value that never ranks it above a candidate the list holds."""
    known = x[~np.isnan(x)]
    if len(known) < 2 or known.std() == 0:
        z = np.zeros_like(x)
        z[np.isnan(x)] = -1.0
        return z
    z = (x - known.mean()) / known.std()
    return np.where(np.isnan(z), np.nanmin(z), z)


def teacher_scores(c: Candidates, alpha: float) -> np.ndarray:
    """(1 + C,) the hybrid teacher's score of the positive (row 0) and each candidate."""
    return alpha * zscore(c.dense.astype(np.float64)) + (1.0 - alpha) * zscore(c.bm25.astype(np.float64))


def label(
    cands: Sequence[Candidates], *, alpha: float, depth: int, skip_top: int, consistency_top_k: int
) -> tuple[list[Example], dict[str, float]]:
    """Teacher pseudo-labels: filtered examples with their negative pools and margins, and counts for the log."""
    out: list[Example] = []
    ranks = []
    for c in cands:
        t = teacher_scores(c, alpha)  # (1 + C,)
        rank = int((t[1:] > t[0]).sum()) + 1  # the source's 1-based rank among the candidates
        ranks.append(rank)
        if consistency_top_k and rank > consistency_top_k:
            continue
        order = np.argsort(-t[1:], kind="stable")[skip_top:depth]  # candidate rows, best first
        out.append(
            Example(
                c.query,
                c.positive,
                c.doc_id,
                [c.texts[i] for i in order],
                [c.doc_ids[i] for i in order],
                (t[0] - t[1:][order]).astype(np.float32),
            )
        )
    r = np.asarray(ranks or [0])
    stats = {
        "pseudo_queries": len(cands),
        "kept": len(out),
        "source_top1": float((r == 1).mean()),
        "source_top10": float((r <= 10).mean()),
    }
    log.info("teacher: %s", stats)
    return out, stats


@dataclass
class ListExample:
    """A query for listwise distillation: rows of the text table (its source first, when it has one) and the
    teacher's score of each."""

    query: str
    rows: np.ndarray  # (C,) int64 rows of the text table
    teacher: np.ndarray  # (C,) float32 teacher scores, z units


def listwise(
    cands: Sequence[Candidates], *, alpha: float, consistency_top_k: int
) -> tuple[list[ListExample], list[str], dict[str, float]]:
    """Teacher lists for the query-encoder recipe: each query's source (when it has one; a query from a query
    log has none, `doc_id` empty) and candidates, with teacher scores; the table of texts the rows index (each
    text once); and counts for the log. A pseudo-query whose source the teacher ranks below
    `consistency_top_k` is dropped, as in `label`."""
    table: dict[str, int] = {}
    out: list[ListExample] = []
    ranks = []
    for c in cands:
        if not c.doc_id:  # no source: the teacher's lists alone
            t = teacher_scores(Candidates(c.query, "", "", dense=c.dense[1:], bm25=c.bm25[1:]), alpha)
            texts = c.texts
        else:
            t = teacher_scores(c, alpha)  # (1 + C,)
            rank = int((t[1:] > t[0]).sum()) + 1
            ranks.append(rank)
            if consistency_top_k and rank > consistency_top_k:
                continue
            texts = [c.positive, *c.texts]
        if len(texts) < 2:
            continue  # one candidate teaches nothing about order
        rows = np.array([table.setdefault(x, len(table)) for x in texts], dtype=np.int64)
        out.append(ListExample(c.query, rows, t.astype(np.float32)))
    r = np.asarray(ranks or [0])
    stats = {
        "pseudo_queries": len(cands),
        "kept": len(out),
        "with_source": len(ranks),
        "source_top1": float((r == 1).mean()) if ranks else 0.0,
        "source_top10": float((r <= 10).mean()) if ranks else 0.0,
        "texts": len(table),
    }
    log.info("teacher: %s", stats)
    return out, list(table), stats


def sources_only(cands: Sequence[Candidates]) -> tuple[list[ListExample], list[str]]:
    """The query-encoder ablation without a teacher: each pseudo-query's source is its one right answer, the
    other sources of the batch its negatives (a logged query, having no source, teaches nothing here)."""
    table: dict[str, int] = {}
    out = [
        ListExample(c.query, np.array([table.setdefault(c.positive, len(table))]), np.zeros(1, np.float32))
        for c in cands
        if c.doc_id
    ]
    return out, list(table)


def unlabelled(cands: Sequence[Candidates]) -> list[Example]:
    """The ablation without a teacher: every pseudo-query, its source as the positive, in-batch negatives only."""
    return [Example(c.query, c.positive, c.doc_id, [], [], np.zeros(0, np.float32)) for c in cands]


class ExampleDataset(torch.utils.data.Dataset[int]):
    """Item i is just i: the collator samples the negatives (a fresh draw from the pool each epoch)."""

    def __init__(self, examples: Sequence[Any]) -> None:  # Example or ListExample rows
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> int:
        return i
