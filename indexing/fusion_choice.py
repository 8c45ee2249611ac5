"""Choosing a collection's fusion without labels: pseudo-queries cut out of its own documents.

How good is each retriever on this collection? With no judged queries, the collection is asked itself, as the
Inverse Cloze Task does (Lee et al. 2019, ORQA): a sentence of a sampled passage is the query, and the
passage *without that sentence* is the one relevant document. Removing the sentence is what keeps the
estimate fair: scored against the whole passage, a query copied out of it matches every one of its words
and BM25 wins by construction. Without them, BM25 has only the words the sentence shares with the rest of
its passage, and the dense model the meaning: the gap that separates the two on real queries.

Each pseudo-query is searched with dense and BM25 through the engine (the collection's published index,
lists as deep as the fusion reads), its source document is taken out of both lists, and the cut passage
is put back with the scores it gets as an indexed passage would: a float64 cosine of its vector, and BM25
with the whole collection's statistics. Every candidate fusion (indexing/fusion.py: RRF, weighted RRF,
convex combinations over three normalisations and alphas, each list alone) is then scored by NDCG@10 of
the source over the pseudo-queries, and the best is kept (ties: the first candidate, simpler first).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from indexing.bm25 import tokenize
from indexing.dense import exact_scores
from indexing.engine import Fanout, on_versions
from indexing.engine import search as engine_search
from indexing.fusion import FusionSpec, rank_of
from indexing.merger import BACKGROUND, deleted
from indexing.postings import Postings, TermStats
from indexing.pseudo_queries import ChoiceParams, PseudoQuery, sample_pseudo_queries
from indexing.ranking import Mode, RankRequest
from indexing.settings import switch

log = logging.getLogger("vela.fusion")
TARGET = ("pseudo-query", "source")  # the cut passage's unit key: no collection unit is a tuple of strings
ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def candidates() -> list[FusionSpec]:
    """What the chooser compares, simpler first (a tie goes to the earlier one): RRF, one list alone,
    weighted RRF, then convex combinations by normalisation and alpha."""
    out = [FusionSpec("rrf"), FusionSpec("dense"), FusionSpec("bm25")]
    out += [FusionSpec("rrf", alpha=a) for a in (0.3, 0.7)]
    out += [FusionSpec("convex", alpha=a, normalization=n) for n in ("minmax", "zscore", "dbsf") for a in ALPHAS]
    return out


@dataclass
class Choice:
    spec: FusionSpec
    scores: dict[str, float]  # mean NDCG@10 of the source per candidate label
    documents: int
    queries: int
    seconds: float = 0.0
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        """What the collection's settings keep: the fusion, and how it was chosen (shown by GET /collections)."""
        base = {k: round(v, 4) for k, v in self.scores.items() if k in ("rrf", "dense", "bm25")}
        evidence = {
            "documents": self.documents,
            "pseudo_queries": self.queries,
            "seconds": round(self.seconds, 2),
            "at": round(self.at, 3),
            "ndcg@10": {self.spec.label: round(self.scores[self.spec.label], 4), **base},
        }
        return {**self.spec.to_json(), "chosen": evidence}


def pseudo_runs(
    coll: Any, embedder: Any, fanout: Fanout, pqs: Sequence[PseudoQuery], params: ChoiceParams
) -> list[dict[str, list[tuple[Hashable, float]]]]:
    """Per pseudo-query, its dense and BM25 lists (unit, score), top depth, the source document replaced by
    the cut passage (unit TARGET) at the scores it gets."""
    queries = [p.query for p in pqs]
    context = coll.query_context(fanout)
    qv = embedder.encode_queries(queries, context=context)  # (nq, d)
    dv = embedder.encode_documents([p.rest for p in pqs], context=context)  # (nq, d)
    dense_target = exact_scores(dv[:, None, :], qv)[:, 0]  # (nq,) as the index scores a stored passage
    # The index is read after the encoding, which takes seconds: writers that commit meanwhile remove what no
    # recent manifest names (manifest.KEEP_MANIFESTS), and a version read before it could be gone. One that
    # goes even so is read again, as a search request's is.
    bm25_target, lists = on_versions(
        coll, lambda v: (_bm25_of_rest(coll, fanout, v, pqs), _lists(coll, fanout, qv, queries, pqs, params, v))
    )
    out = []
    for i in range(len(pqs)):
        runs: dict[str, list[tuple[Hashable, float]]] = {}
        for mode, target in (("dense", float(dense_target[i])), ("bm25", float(bm25_target[i]))):
            run = lists[mode][i]
            if mode == "dense" or target > 0:  # BM25 lists only passages that share a term with the query
                at = next((r for r, (_, s) in enumerate(run) if s < target), len(run))  # after equal scores
                run = [*run[:at], (TARGET, target), *run[at:]]
            runs[mode] = run[: params.depth]
        out.append(runs)
    return out


def _lists(
    coll: Any,
    fanout: Fanout,
    qv: np.ndarray,
    queries: list[str],
    pqs: Sequence[PseudoQuery],
    params: ChoiceParams,
    versions: list[int],
) -> dict[str, list[list[tuple[Hashable, float]]]]:
    """Per mode, each pseudo-query's list (unit, score) without its source document's passages."""
    lists: dict[str, list[list[tuple[Hashable, float]]]] = {}
    modes: tuple[Mode, Mode] = ("dense", "bm25")
    for mode in modes:
        req = RankRequest(mode=mode, k=params.depth + 1, depth=params.depth)
        found = engine_search(coll, fanout, qv if mode == "dense" else None, queries, req, versions=versions)
        lists[mode] = [
            [(key, score) for key, score, pid in f.top if pid not in p.pids] for f, p in zip(found, pqs, strict=True)
        ]
    return lists


def _bm25_of_rest(coll: Any, fanout: Fanout, versions: list[int], pqs: Sequence[PseudoQuery]) -> np.ndarray:
    """Each cut passage's BM25 for its query, with the collection's N, average length and document
    frequencies (the engine's own two steps: counts summed over the shards, then the formula)."""
    from indexing.engine import _mean_idf  # okapi's idf floor: the engine's cached vocabulary mean

    min_chars, normalize = coll.bm25_min_token_chars, coll.bm25_normalize
    tokens = tokenize([p.query for p in pqs], min_chars=min_chars, normalize=normalize)
    terms = {t for q in tokens for t in q}
    refs = coll.shard_refs()
    parts = fanout.call(refs, "term_stats", [{"version": v, "terms": terms} for v in versions])
    mean_idf = _mean_idf(fanout, refs, versions) if coll.bm25_method == "okapi" else 0.0
    stats = TermStats.merge(parts, mean_idf)
    params = coll.settings.bm25
    out = np.zeros(len(pqs))
    for i, rest in enumerate(tokenize([p.rest for p in pqs], min_chars=min_chars, normalize=normalize)):
        rows, scores = Postings.build([rest]).score(tokens[i], stats, params)
        out[i] = float(scores[0]) if len(rows) else 0.0
    return out


def score_candidates(
    runs: Sequence[dict[str, list[tuple[Hashable, float]]]], specs: Sequence[FusionSpec], params: ChoiceParams
) -> dict[str, float]:
    """Mean NDCG@10 of the source per candidate (its label): 1 / log2(1 + rank) within the top 10."""
    gains = np.zeros(len(specs))
    for r in runs:
        ranks = np.asarray(rank_of(r, TARGET, specs, rrf_k=params.rrf_k, depth=params.depth))
        gains += np.where((ranks >= 1) & (ranks <= 10), 1.0 / np.log2(1.0 + np.maximum(ranks, 1)), 0.0)
    return {spec.label: float(g / max(len(runs), 1)) for spec, g in zip(specs, gains, strict=True)}


def choose_fusion(coll: Any, embedder: Any, fanout: Fanout, params: ChoiceParams | None = None) -> Choice:
    """The best candidate fusion for this collection by its pseudo-queries (RRF when it has none)."""
    params = params or ChoiceParams()
    t0 = time.perf_counter()
    documents = sum(s.docstore.counts()[0] for s in coll.shard_list)
    pqs = sample_pseudo_queries(coll, params)
    specs = candidates()
    runs = pseudo_runs(coll, embedder, fanout, pqs, params) if pqs else []
    scores = score_candidates(runs, specs, params)
    best = max(specs, key=lambda s: scores[s.label]) if runs else FusionSpec()  # max keeps the first of ties
    return Choice(best, scores, documents, len(pqs), time.perf_counter() - t0)


# --- kept with the collection, chosen again as it grows ----------------------------------------------------
MIN_DOCUMENTS = 50  # fewer documents: too few pseudo-queries to tell fusions apart; RRF stays
FUSION_AUTO_ENV = "VELA_FUSION_AUTO"


def _auto_choose() -> bool:
    """VELA_FUSION_AUTO=0 (or false, no, off) turns the choice after ingest jobs off (tools that time ingest alone
    set it). A spelling `switch` does not take is refused where the settings are read (IndexingSettings.fusion_auto:
    `vela serve` and `vela worker` stop at start-up, as for any bad setting); here it counts as the default, on."""
    try:
        return switch(os.environ.get(FUSION_AUTO_ENV, "1"))
    except ValueError:
        return True


AUTO_CHOOSE = _auto_choose()


def documents_of(coll: Any) -> int:
    return sum(int(s.docstore.counts()[0]) for s in coll.shard_list)


def choice_due(coll: Any) -> bool:
    """True when the collection has never chosen and holds MIN_DOCUMENTS, or has doubled since its choice."""
    chosen = (coll.settings.fusion or {}).get("chosen")
    docs = documents_of(coll)
    if not chosen:
        return docs >= MIN_DOCUMENTS
    return docs >= max(MIN_DOCUMENTS, 2 * int(chosen.get("documents", 0)))


def refresh_choice(coll: Any, embedder: Any, fanout: Fanout, params: ChoiceParams | None = None) -> Choice:
    """Choose again on the published index and keep the choice in the collection's settings."""
    choice = choose_fusion(coll, embedder, fanout, params)
    with coll.writer():
        coll.set_fusion(choice.to_json())
    log.info(
        "fusion chosen",
        extra={"collection": coll.name, "fusion": choice.spec.label, "seconds": round(choice.seconds, 2)},
    )
    return choice


def after_ingest(collections: Any, coll: Any, embedders: Any) -> None:
    """After an ingest job's commit: choose again when the collection has doubled (see choice_due), in the
    background thread that also merges (indexing/merger.py), so that the job is done and its documents are
    searchable without waiting for it: choosing embeds a few hundred pseudo-queries, 34 s on a million
    passages. Until it ends the previous choice stays in force; never on a request. A failure is logged and
    leaves the previous choice in force; a choice cut short by the process's end is still due after the next
    ingest job."""
    if not AUTO_CHOOSE or not choice_due(coll):
        return

    def choose() -> None:
        if deleted(coll):  # deleted while this waited: nothing to choose for
            return
        if choice_due(coll):  # another process may have chosen meanwhile
            refresh_choice(coll, embedders.get(coll.settings.embedder), collections.fanout)

    BACKGROUND.submit(("fusion", id(coll)), choose, coll)
