"""The rerank stage: a cross-encoder rescores the top fused hits of a query, within a time budget.

Domain functions (keyword-only, no HTTP). `prepare_rerank` turns a request's options into a step that
`search_batch` runs on each query's hits after fusion; the step never raises: a reranker that fails or runs
out of time leaves the fused order as it was, and says so in its `RerankOutcome` (the API puts it in the
response, and counts it in metrics).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np

from indexing.fusion import reciprocal_rank_fusion
from models.reranker import CrossEncoder, NotARerankerError, RerankerCache, document_text
from service.model_registry import UNREGISTERED
from service.search import Hit

log = logging.getLogger("vela.rerank")

Status = Literal["ok", "timeout", "error"]


class UnknownReranker(ValueError):
    """The model named is not a reranker directory (missing, or another kind of model)."""


class NoReranker(ValueError):
    """A rerank was asked for without a model, and the process has no default (VELA_RERANKER)."""


@dataclass(frozen=True)
class RerankOutcome:
    model: str
    status: Status
    top_n: int
    scored: int  # pairs the cross-encoder scored (all candidates when ok)
    took_ms: float
    error: str | None = None
    weight: float = 1.0  # the cross-encoder's share of the final order (see rerank_hits)


@dataclass(frozen=True)
class Reranking:
    """One request's rerank step: `search_batch` calls it with each query's fused hits."""

    model: str
    top_n: int
    max_ms: float | None
    batch_size: int
    encoder: CrossEncoder | None  # None: the model failed to load (load_error says why)
    load_error: str | None = None
    weight: float = 1.0
    rrf_k: int = 60

    def __call__(self, query: str, hits: list[Hit]) -> tuple[list[Hit], RerankOutcome]:
        if self.encoder is None:
            outcome = RerankOutcome(self.model, "error", self.top_n, 0, 0.0, self.load_error, self.weight)
            return hits, outcome
        return rerank_hits(
            label=self.model,
            encoder=self.encoder,
            query=query,
            hits=hits,
            top_n=self.top_n,
            max_ms=self.max_ms,
            batch_size=self.batch_size,
            weight=self.weight,
            rrf_k=self.rrf_k,
        )


def prepare_rerank(
    *,
    cache: RerankerCache,
    model: str | None,
    default_model: str | None,
    top_n: int,
    max_ms: float | None,
    batch_size: int,
    weight: float = 1.0,
    rrf_k: int = 60,
    label: str | None = None,
) -> Reranking:
    """Resolve and (once per process) load the reranker. A bad name is the caller's error (UnknownReranker,
    NoReranker); a reranker that exists but will not load is the service's, reported per query.

    `label`: what outcomes call the model (a registry name, or `unregistered`: the caller's public_model_name), never
    its folder on the server."""
    name = model or default_model
    if not name:
        raise NoReranker("rerank.model is required: this server has no default reranker (VELA_RERANKER)")
    try:
        path = str(cache.resolve(name))
    except (FileNotFoundError, NotARerankerError) as exc:
        raise UnknownReranker(str(exc)) from exc
    shown = label if label is not None else UNREGISTERED
    try:
        encoder = cache.get(path)
    except Exception as exc:  # a broken directory must not take the search down with it
        log.exception("reranker failed to load", extra={"reranker": path})
        error = f"reranker failed to load: {_describe(exc)}"
        return Reranking(shown, top_n, max_ms, batch_size, None, error, weight, rrf_k)
    return Reranking(shown, top_n, max_ms, batch_size, encoder, None, weight, rrf_k)


def rerank_hits(
    *,
    encoder: CrossEncoder,
    query: str,
    hits: list[Hit],
    top_n: int,
    max_ms: float | None,
    batch_size: int,
    weight: float = 1.0,
    rrf_k: int = 60,
    label: str | None = None,
) -> tuple[list[Hit], RerankOutcome]:
    """Score the first `top_n` hits in batches and reorder them; the rest keep their fused order.

    `weight` 1 orders the head by the cross-encoder's score alone. Below 1 the new order is a weighted
    reciprocal rank fusion of two rankings of the same head, the cross-encoder's (weight `weight`) and the
    fused one (weight 1 - `weight`): ranks, not scores, so the two need no common scale. It keeps the first
    stage's evidence where a cross-encoder trained on little data is unsure.

    The budget is checked before each batch against a prediction of its cost (this query's measured time per
    pair, else the model's recent average), so a batch that cannot finish in time is not started. Any
    result not complete within `max_ms` is dropped: the outcome is "timeout" and the fused order stands.
    """
    head, tail = hits[:top_n], hits[top_n:]
    # Similar lengths share a batch: less padding, and the same pairs in the same batches every time.
    order = sorted(range(len(head)), key=lambda i: len(head[i].text))
    scores = np.zeros(len(head), dtype=np.float32)
    t0 = time.perf_counter()
    scored = 0

    def outcome(status: Status, error: str | None = None) -> RerankOutcome:
        took_ms = (time.perf_counter() - t0) * 1000.0
        return RerankOutcome(label or encoder.name, status, top_n, scored, round(took_ms, 3), error, weight)

    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        elapsed = time.perf_counter() - t0
        per_pair = elapsed / scored if scored else encoder.seconds_per_pair
        if max_ms is not None and per_pair is not None and (elapsed + per_pair * len(idx)) * 1000.0 > max_ms:
            return hits, outcome("timeout", f"rerank budget of {max_ms:g} ms exceeded after {scored} pairs")
        try:
            scores[idx] = encoder.score(query, [document_text(head[i].title, head[i].text) for i in idx])
        except Exception as exc:
            log.exception("reranker failed", extra={"reranker": encoder.name})
            return hits, outcome("error", f"reranker failed: {_describe(exc)}")
        scored += len(idx)
    if max_ms is not None and (time.perf_counter() - t0) * 1000.0 > max_ms:
        return hits, outcome("timeout", f"rerank budget of {max_ms:g} ms exceeded after {scored} pairs")
    if not np.isfinite(scores).all():
        return hits, outcome("error", "reranker returned non-finite scores")
    # A stable sort: equal scores keep the fused order.
    ranked = sorted(range(len(head)), key=lambda i: -float(scores[i]))
    if weight < 1.0:
        fused = reciprocal_rank_fusion(
            {"rerank": ranked, "fused": list(range(len(head)))},
            k=rrf_k,
            depth=len(head),
            weights={"rerank": weight, "fused": 1.0 - weight},
        )
        ranked = [cast(int, i) for i, _ in fused]
    reranked = [dataclasses.replace(head[i], rerank_score=float(scores[i])) for i in ranked]
    return reranked + tail, outcome("ok")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = ["NoReranker", "RerankOutcome", "Reranking", "UnknownReranker", "prepare_rerank", "rerank_hits"]
