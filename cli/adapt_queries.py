"""The engine side of `vela adapt`: pseudo-queries cut from a collection's documents, and the teacher's view of each.

Pseudo-queries are the documents' titles where most have one, else sentences cut out of passages (the Inverse
Cloze Task of the fusion chooser, indexing/pseudo_queries.py), plus any unlabelled queries from a file (a query
log). Each is searched through the engine with dense and BM25; what comes back is plain data
(training/adapt/dataset.py `Candidates`) that the recipe turns into pseudo-labels.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("vela.adapt")
SEARCH_CHUNK = 256  # pseudo-queries per engine search call
TITLED_SHARE = 0.5  # titles alone are the pseudo-queries where at least this share of documents gives one


def logged_queries(path: str) -> list[Any]:
    """--queries: unlabelled queries from a file, as pseudo-queries without a source (no document is theirs)."""
    if not path:
        return []
    from indexing.pseudo_queries import ChoiceParams, PseudoQuery
    from velaio.beir import read_query_texts

    try:
        texts = read_query_texts(Path(path))
    except (OSError, ValueError) as e:
        raise LookupError(f"--queries: cannot read {path}: {e}") from e
    log.info("%d queries from %s", len(texts), path)
    cut = ChoiceParams().max_words  # cut as the pseudo-queries are: queries are short
    return [PseudoQuery("", frozenset(), " ".join(t.split()[:cut]), "") for t in texts]


def pseudo_queries(coll: Any, aargs: Any) -> list[Any]:
    """Title pseudo-queries where at least half the documents have a title that makes one (one per such
    document); otherwise ICT pseudo-queries, `queries_per_doc` rounds of the fusion chooser's sampler (a new seed
    each round: another sentence of another passage), duplicates dropped, beside what titles there are. At most
    max_queries in all, a seeded sample."""
    import random

    from indexing.fusion_choice import documents_of
    from indexing.pseudo_queries import ChoiceParams, sample_pseudo_queries, title_pseudo_queries

    docs = documents_of(coll)
    titles = title_pseudo_queries(coll) if aargs.title_queries else []
    out: dict[tuple[str, str], Any] = {(p.doc_id, p.query): p for p in titles}
    if aargs.queries_per_doc and len(titles) < TITLED_SHARE * docs:
        per_round = docs if not aargs.max_queries else min(docs, -(-aargs.max_queries // aargs.queries_per_doc))
        for r in range(aargs.queries_per_doc):
            for p in sample_pseudo_queries(coll, ChoiceParams(samples=per_round, seed=aargs.seed + r)):
                out.setdefault((p.doc_id, p.query), p)
    chosen = list(out.values())
    if aargs.max_queries and len(chosen) > aargs.max_queries:
        chosen = random.Random(aargs.seed).sample(chosen, aargs.max_queries)
    log.info("%d pseudo-queries (%d titles) from %d documents", len(chosen), len(titles), docs)
    return chosen


def bare_candidates(p: Any) -> Any:
    from training.adapt.dataset import Candidates

    return Candidates(p.query, p.rest, p.doc_id)


def candidates(coll: Any, embedder: Any, fanout: Any, pqs: list[Any], depth: int) -> list[Any]:
    """The teacher's view of each pseudo-query: its source (the cut passage, scored as an indexed passage
    would be: cosine of its vector, BM25 with the collection's statistics) and the top `depth` documents of
    the dense and the BM25 list (the source document left out), with both scores where each list has them."""
    from indexing.dense import exact_scores
    from indexing.engine import search as engine_search
    from indexing.fusion_choice import _bm25_of_rest
    from indexing.ranking import RankRequest
    from training.adapt.dataset import Candidates
    from velaio.text import passage_text

    versions = coll.published_versions()
    context = coll.query_context(fanout)
    out: list[Candidates] = []
    for start in range(0, len(pqs), SEARCH_CHUNK):
        part = pqs[start : start + SEARCH_CHUNK]
        queries = [p.query for p in part]
        qv = embedder.encode_queries(queries, context=context)  # (n, d)
        own = [i for i, p in enumerate(part) if p.doc_id]  # a logged query has no source to score
        dense_pos = np.full(len(part), np.nan)  # (n,)
        bm25_pos = np.full(len(part), np.nan)  # (n,)
        if own:
            dv = embedder.encode_documents([part[i].rest for i in own], context=context)  # (m, d)
            dense_pos[own] = exact_scores(dv[:, None, :], qv[own])[:, 0]
            bm25_pos[own] = _bm25_of_rest(coll, fanout, versions, [part[i] for i in own])
        found = {}
        for mode in ("dense", "bm25"):
            req = RankRequest(mode=mode, k=depth + 1, depth=depth)  # type: ignore[arg-type]
            found[mode] = engine_search(coll, fanout, qv if mode == "dense" else None, queries, req, versions=versions)
        wanted: dict[int, int] = {}
        for mode in found:
            for f in found[mode]:
                wanted.update({pid: f.shard_of[pid] for _, _, pid in f.top})
        hits = coll.passages(wanted)
        for i, p in enumerate(part):
            scores: dict[str, dict[Any, float]] = {"dense": {}, "bm25": {}}
            text_of: dict[Any, tuple[str, str]] = {}
            for mode in ("dense", "bm25"):
                for key, score, pid in found[mode][i].top:
                    if pid in p.pids or pid not in hits:
                        continue
                    scores[mode][key] = float(score)
                    h = hits[pid]
                    text_of.setdefault(key, (h.doc_id, passage_text(h.title, h.text)))
            keys = list(text_of)[: 2 * depth]
            out.append(
                Candidates(
                    p.query,
                    p.rest,
                    p.doc_id,
                    [text_of[k][1] for k in keys],
                    [text_of[k][0] for k in keys],
                    np.array([dense_pos[i], *(scores["dense"].get(k, np.nan) for k in keys)]),
                    np.array([bm25_pos[i], *(scores["bm25"].get(k, np.nan) for k in keys)]),
                )
            )
        log.info("teacher: %d of %d pseudo-queries searched", len(out), len(pqs))
    return out
