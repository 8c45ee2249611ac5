"""`vela eval`: ingest a BEIR dataset through the product's own ingest and search code, then score it."""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import ir_measures
from tqdm import tqdm

from cli.beir import read_corpus, read_qrels, read_queries
from indexing.ingest import run_job
from indexing.jobs import JobKind
from service.documents import get_or_create_collection
from service.search import search_batch
from service.settings import Settings
from service.state import build_state

MEASURES = {"ndcg@10": ir_measures.nDCG @ 10, "recall@100": ir_measures.R @ 100, "mrr@10": ir_measures.RR @ 10}
INGEST_CHUNK = 5000  # documents per job: bounded job payloads, progress per batch
QUERY_BATCH = 64


def evaluate(
    *,
    data: Path,
    modes: list[str],
    dim: str,
    embedder: str | None,
    split: str,
    workdir: Path | None,
    rescore: bool = True,
) -> dict[str, Any]:
    t0 = time.time()
    settings = Settings()
    update: dict[str, Any] = {"data_dir": workdir or settings.data_dir / "eval"}
    if embedder:
        update["embedder"] = embedder
    settings = settings.model_copy(update=update)
    state = build_state(settings)
    model_dir = str(state.embedders.get(settings.embedder).name)
    tag = hashlib.sha1(model_dir.encode()).hexdigest()[:8]
    name = f"{data.name}-{tag}"
    coll = get_or_create_collection(state=state, name=name, embedder=settings.embedder)

    docs = list(read_corpus(data))
    with tqdm(total=len(docs), desc=f"ingest {data.name}", unit="doc") as bar:
        for start in range(0, len(docs), INGEST_CHUNK):
            part = docs[start : start + INGEST_CHUNK]
            job = state.jobs.create(collection=name, kind=JobKind.UPSERT, payload=part)
            base = bar.n

            def advance(done: int, _total: int, base: int = base) -> None:
                bar.update(base + done - bar.n)

            run_job(
                job_id=job.id,
                jobs=state.jobs,
                collections=state.collections,
                embedders=state.embedders,
                batch_size=settings.ingest_batch_size,
                on_progress=advance,
            )
            final = state.jobs.get(job.id)
            if final.status != "succeeded":
                raise RuntimeError(f"ingest job {job.id} ended {final.status}: {final.error}")
    ingest_s = time.time() - t0

    qrels = read_qrels(data, split)
    queries = read_queries(data)
    qids = [q for q in qrels if q in queries]
    emb = state.embedders.get(coll.settings.embedder)
    metrics: dict[str, dict[str, float]] = {}
    for mode in modes:
        run: dict[str, dict[str, float]] = {}
        for start in tqdm(range(0, len(qids), QUERY_BATCH), desc=f"search {mode}", unit="batch"):
            batch = qids[start : start + QUERY_BATCH]
            results = search_batch(
                collection=coll,
                embedder=emb if mode != "bm25" else None,
                queries=[queries[q] for q in batch],
                k=100,
                mode=mode,  # type: ignore[arg-type]
                dim=dim,  # type: ignore[arg-type]
                rescore=rescore,
            )
            for qid, res in zip(batch, results, strict=True):
                # Scores for ir_measures must order like the ranks; RRF and BM25 ties keep their list order.
                run[qid] = {h.id: float(len(res.hits) - i) for i, h in enumerate(res.hits)}
        agg = ir_measures.calc_aggregate(list(MEASURES.values()), qrels, run)
        metrics[mode] = {name: round(float(agg[m]), 4) for name, m in MEASURES.items()}
    stats = coll.stats()
    return {
        "dataset": data.name,
        "metrics": metrics,
        "dim": dim,
        "rescore": rescore if dim == "256" else None,
        "seconds": round(time.time() - t0, 1),
        "ingest_seconds": round(ingest_s, 1),
        "documents": stats["documents"],
        "passages": stats["passages"],
        "queries": len(qids),
        "split": split,
        "embedder": model_dir,
    }


def print_table(result: dict[str, Any]) -> None:
    names = list(MEASURES)
    print(
        f"\n{result['dataset']} ({result['queries']} queries, {result['passages']} passages, dim {result['dim']}"
        + (", no rescore)" if result["rescore"] is False else ")")
    )
    print(f"{'mode':<8}" + "".join(f"{n:>12}" for n in names))
    for mode, m in result["metrics"].items():
        print(f"{mode:<8}" + "".join(f"{m[n]:>12.4f}" for n in names))


def main(args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in ("bm25", "dense", "hybrid")]
    if bad:
        print(f"unknown modes {bad}: use bm25, dense, hybrid", file=sys.stderr)
        return 2
    result = evaluate(
        data=Path(args.data),
        modes=modes,
        dim=args.dim,
        embedder=args.embedder,
        split=args.split,
        workdir=Path(args.workdir) if args.workdir else None,
        rescore=not args.no_rescore,
    )
    result["command"] = "vela " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    print_table(result)
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    return 0
