"""The searching side of `vela eval`: the dataset's ingest, each mode's run, the latency pass and the rerank memo."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import numpy as np
from tqdm import tqdm

from cli.console import DocumentBar
from indexing.ingest import run_job
from indexing.jobs import JobKind
from indexing.merger import wait_background
from service.rerank import Reranking
from service.search import search_batch
from velaio.measures import ranked_scores

INGEST_CHUNK = 5000  # documents per job: bounded job payloads, progress per batch
SCAN_PAGE = 5000  # stored ids read per query when looking for those no longer in the corpus
QUERY_BATCH = 64
DEPTH = 100  # hits per query: the deepest measure's cut (R@100), and the run files' depth


def ingest_dataset(state: Any, name: str, docs: list[dict[str, Any]], *, label: str, batch_size: int) -> int:
    """Make collection `name` mirror `docs` through the product's own jobs: stored ids no longer among them are
    deleted, then every document is upserted (content hashes skip the unchanged ones, so a re-run on the same
    workdir embeds only what changed). Returns how many stored documents were deleted."""
    wanted = {d["id"] for d in docs}
    coll = state.collections.get(name)
    stale = [doc_id for doc_id, _ in coll.scan_metadata(None, SCAN_PAGE) if doc_id not in wanted]
    if stale:  # a document removed from the corpus would still be found, and counted, otherwise
        _run_to_end(state, state.jobs.create(collection=name, kind=JobKind.DELETE, payload=stale).id, batch_size)
    # One bar over every chunk, closed at the last document: the last job's commit and background work, after
    # it, would otherwise print the bar again with a later time.
    with DocumentBar(f"ingest {label}") as bar:
        for start in range(0, len(docs), INGEST_CHUNK):
            job = state.jobs.create(collection=name, kind=JobKind.UPSERT, payload=docs[start : start + INGEST_CHUNK])

            def advance(done: int, _total: int, base: int = start) -> None:
                bar(base + done, len(docs))

            _run_to_end(state, job.id, batch_size, advance)
    return len(stale)


def _run_to_end(state: Any, job_id: str, batch_size: int, on_progress: Any = None) -> None:
    run_job(
        job_id=job_id,
        jobs=state.jobs,
        collections=state.collections,
        embedders=state.embedders,
        batch_size=batch_size,
        on_progress=on_progress,
    )
    wait_background()  # the merges and fusion choice this job made due, as a server would have made them
    final = state.jobs.get(job_id)
    if final.status != "succeeded":
        raise RuntimeError(f"{final.kind} job {job_id} ended {final.status}: {final.error}")


def what_ran(embedder: Any) -> dict[str, str]:
    """How the embedder that searched ran: its backend and the precision of its query graph or weights, and for an
    ONNX model whose documents go through another graph, that graph's (the packaged default's int8 export, say)."""
    backend = str(embedder.config.backend)
    ran = {"backend": backend, "precision": str(embedder.precision)}
    documents = getattr(embedder, "document_precision", None)  # the ONNX backend's alone
    if backend == "onnx" and documents and documents != ran["precision"]:
        ran["document_precision"] = str(documents)
    return ran


class MemoScores:
    """Eval only: a cross-encoder whose scores are kept per (query, text), so that each further rerank
    weight reorders the same scores instead of running the model again."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.name = encoder.name
        self.memo: dict[tuple[str, str], float] = {}

    def __getattr__(self, attr: str) -> Any:  # seconds_per_pair and the rest: the model's own
        return getattr(self.encoder, attr)

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        todo = [d for d in dict.fromkeys(documents) if (query, d) not in self.memo]
        if todo:
            for d, s in zip(todo, self.encoder.score(query, todo), strict=True):
                self.memo[(query, d)] = float(s)
        return np.array([self.memo[(query, d)] for d in documents], dtype=np.float32)


def search_mode(
    *,
    coll: Any,
    embedder: Any,
    queries: dict[str, str],
    qids: list[str],
    mode: str,
    dim: str,
    rescore: bool,
    rerank: Reranking | None,
    batch_size: int = QUERY_BATCH,
) -> tuple[dict[str, dict[str, float]], list[float]]:
    """One mode's run (qid -> {doc: score}), and the rerank time of each query (empty without rerank)."""
    run: dict[str, dict[str, float]] = {}
    rerank_ms: list[float] = []
    desc = f"search {mode}" + (" + rerank" if rerank is not None else "")
    for start in tqdm(range(0, len(qids), batch_size), desc=desc, unit="batch", disable=batch_size == 1):
        batch = qids[start : start + batch_size]
        results = search_batch(
            collection=coll,
            embedder=embedder if mode != "bm25" else None,
            queries=[queries[q] for q in batch],
            k=DEPTH,
            mode=mode,  # type: ignore[arg-type]
            dim=dim,  # type: ignore[arg-type]
            rescore=rescore,
            rerank=rerank,
        )
        for qid, res in zip(batch, results, strict=True):
            if res.rerank is not None:
                if res.rerank.status != "ok":  # a reranker that fails must fail the eval, not score as fused
                    raise RuntimeError(f"rerank of query {qid} ended {res.rerank.status}: {res.rerank.error}")
                rerank_ms.append(res.rerank.took_ms)
            # Scores that order like the ranks, strictly decreasing: RRF and BM25 ties keep Vela's list order
            # in ir_measures here and in any tool that reads the run files (they break ties by doc id).
            run[qid] = ranked_scores([h.id for h in res.hits])
    return run, rerank_ms


def time_queries(search: partial[Any], *, rerank: Reranking | None) -> list[float]:
    """Milliseconds of each query searched alone, as one API request would run (in process, no HTTP). Its run
    is thrown away: the metrics come from the batched pass, whose encoder batches may round differently."""
    qids: list[str] = search.keywords["qids"]
    if not qids:
        return []
    search(qids=qids[:1], rerank=rerank, batch_size=1)  # warm-up: first-call costs are not a query's latency
    took = []
    for q in tqdm(qids, desc=f"latency {search.keywords['mode']}", unit="query"):
        t = time.perf_counter()
        search(qids=[q], rerank=rerank, batch_size=1)
        took.append((time.perf_counter() - t) * 1000.0)
    return took
