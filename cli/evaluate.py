"""`vela eval`: ingest a BEIR dataset through the product's own ingest and search code, then score it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np

from cli.eval_data import (
    EvalData,
    collection_name,
    load_eval_data,
    other_queries,
    pick_models,
    query_set,
)
from cli.eval_flags import dim_problem, modes_of, refused
from cli.eval_report import EvalDetail, NamedRun, load_baselines, write_report
from cli.eval_report import write_run_files as write_trec_runs
from cli.eval_runs import MemoScores, ingest_dataset, search_mode, time_queries, what_ran
from cli.model_names import ModelRefused
from models.reranker import CrossEncoder
from service.documents import get_or_create_collection
from service.rerank import prepare_rerank
from service.settings import Settings
from service.state import build_state
from velaio.files import write_atomic
from velaio.machine import machine
from velaio.measures import MEASURES, score_run


def evaluate(
    *,
    data: Path,
    modes: list[str],
    dim: str,
    embedder: str | None,
    split: str,
    workdir: Path | None,
    rescore: bool = True,
    rerank: str | None = None,
    rerank_top_n: int = 50,
    rerank_weights: tuple[float, ...] = (1.0,),
    query_ids: Path | None = None,
    precision: str | None = None,
    shards: int = 1,
    detail: EvalDetail | None = None,
    latency: bool = False,
    loaded: EvalData | None = None,
) -> dict[str, Any]:
    """Ingest `data`, search its queries in each mode and score them. `embedder` and `rerank`: models as the user
    names them (a registered or built-in name, or a folder; `embedder` None: VELA_EMBEDDER's), and so the results
    call them. `detail`, when given, receives the runs and judgements (for run files and the report); `latency`
    adds a pass that times each query alone; `loaded`: the dataset as load_eval_data read it already."""
    t0 = time.time()
    settings = Settings() if precision is None else Settings(precision=precision)
    emb_choice, rerank_choice = pick_models(embedder, rerank, settings)  # ModelRefused before anything is made
    # What can be refused is refused before anything is created: a bad file or line, ids that match no query.
    loaded = loaded or load_eval_data(data, split, query_ids, settings)
    qrels, queries, qids = loaded.qrels, loaded.queries, loaded.qids
    # The embedder is the operator's (a name or a directory), set as the process default: not a request's.
    update = {"data_dir": workdir or settings.data_dir / "eval", "embedder": emb_choice.load}
    settings = settings.model_copy(update=update)
    state = build_state(settings)
    # --rerank: the service's own rerank step (no time budget) on each mode's top N; the metrics without it
    # are kept as "baseline", and the time it adds per query is reported. Loaded before the ingest.
    step = timed_step = None
    if rerank_choice is not None:
        step = prepare_rerank(
            cache=state.rerankers,
            model=rerank_choice.load,
            label=rerank_choice.given,  # what the results call it, not the folder it resolved to
            default_model=None,
            top_n=rerank_top_n,
            max_ms=None,
            batch_size=settings.rerank_batch_size,
            weight=rerank_weights[0],
        )
        timed_step = step  # the latency pass runs the model itself, not the memo below
        if len(rerank_weights) > 1 and step.encoder is not None:  # the model runs once per pair, for every weight
            step = dataclasses.replace(step, encoder=cast(CrossEncoder, MemoScores(step.encoder)))
    model_dir = str(state.embedders.get(settings.embedder).name)
    name = collection_name(data, model_dir, shards)
    coll = get_or_create_collection(state=state, name=name, embedder=None, shards=shards)
    removed = ingest_dataset(state, name, loaded.docs, label=data.name, batch_size=settings.ingest_batch_size)
    if removed:
        print(f"vela eval: {removed} stored documents are no longer in corpus.jsonl: deleted", file=sys.stderr)
    ingest_s = time.time() - t0

    emb = state.embedders.get(coll.settings.embedder)
    detail = detail if detail is not None else EvalDetail(qrels={}, queries={})
    detail.qrels, detail.queries = qrels, {q: queries[q] for q in qids}
    metrics: dict[str, dict[str, float]] = {}
    baseline: dict[str, dict[str, float]] = {}
    added_ms: dict[str, list[float]] = {}
    by_weight: dict[str, dict[str, dict[str, float]]] = {}
    for mode in modes:
        search = partial(
            search_mode, coll=coll, embedder=emb, queries=queries, qids=qids, mode=mode, dim=dim, rescore=rescore
        )
        name = f"{mode}-{dim}" + ("-norescore" if dim == "256" and not rescore else "")  # the run file's stem
        if step is None:
            run = search(rerank=None)[0]
            metrics[mode] = _score(qrels, run)
            detail.runs.append(NamedRun(name, mode, f"/metrics/{mode}", run))
        else:
            plain = search(rerank=None)[0]
            baseline[mode] = _score(qrels, plain)
            run, added_ms[mode] = search(rerank=step)  # the first weight: the headline, and the latency measured
            metrics[mode] = _score(qrels, run)
            detail.runs += [
                NamedRun(name, mode, f"/baseline/{mode}", plain),
                NamedRun(f"{name}-rerank", mode, f"/metrics/{mode}", run),
            ]
            for w in rerank_weights[1:]:
                again, _ = search(rerank=dataclasses.replace(step, weight=w))  # scores from the memo: no latency
                by_weight.setdefault(f"{w:g}", {})[mode] = _score(qrels, again)
                where = f"/rerank/metrics_by_weight/{w:g}/{mode}"
                detail.runs.append(NamedRun(f"{name}-rerank-w{w:g}", mode, where, again))
        if latency:
            detail.latency_ms[mode] = time_queries(search, rerank=timed_step)
    stats = coll.stats()
    extra: dict[str, Any] = {}
    if detail.latency_ms:
        extra["latency_ms"] = {  # each query searched alone (the report's latency plots)
            m: {f"p{p}": round(float(np.percentile(v, p)), 1) for p in (50, 90, 99)}
            for m, v in detail.latency_ms.items()
        }
    if step is not None:
        extra["baseline"] = baseline  # the same modes without the rerank stage
        extra["rerank"] = {
            "model": step.model,
            "top_n": rerank_top_n,
            "weight": rerank_weights[0],
            "backend": "torch",  # rerankers have no other
            "precision": state.rerankers.precision,
            "batch_size": settings.rerank_batch_size,
            "added_latency_ms_p50": {m: round(float(np.percentile(v, 50)), 1) for m, v in added_ms.items() if v},
            "added_latency_ms_p90": {m: round(float(np.percentile(v, 90)), 1) for m, v in added_ms.items() if v},
        }
        if by_weight:
            extra["rerank"]["metrics_by_weight"] = {f"{rerank_weights[0]:g}": metrics, **by_weight}
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
        "query_set": query_set(qids),  # a baseline must have scored the same queries (cli/eval_data.py)
        "split": split,
        **({"query_ids": str(query_ids)} if query_ids is not None else {}),
        "embedder": emb_choice.given,  # as named: a machine-local cache path would say nothing elsewhere
        **what_ran(emb),  # backend and precision of what searched, not the precision setting
        "machine": machine(),
        **extra,
    }


def _score(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    return score_run(qrels, run, MEASURES)


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
    why = refused(args)
    data, query_ids = Path(args.data), Path(args.query_ids) if args.query_ids else None
    settings = Settings() if args.precision is None else Settings(precision=args.precision)
    try:
        emb, _ = pick_models(args.embedder, args.rerank, settings)
        why = why or dim_problem(args.dim, emb)
    except ModelRefused as e:
        why = why or str(e)
    if why:  # before hours of ingest, not after
        print(f"vela eval: {why}", file=sys.stderr)
        return 2
    try:  # every file read and checked before a collection is made
        loaded = load_eval_data(data, args.split, query_ids, settings)
    except ValueError as e:
        print(f"vela eval: {e}", file=sys.stderr)
        return 2
    for b in args.baseline or []:  # the queries are known once the files are read, still before the ingest
        why = other_queries(Path(b), loaded.qids, query_ids)
        if why:
            print(f"vela eval: --baseline: {why}", file=sys.stderr)
            return 2
    weights = tuple(float(w) for w in args.rerank_weight.split(","))  # refused() checked them
    baselines = [Path(b) for b in args.baseline or []]
    detail = EvalDetail(qrels={}, queries={})
    result = evaluate(
        data=data,
        modes=modes_of(args),
        dim=args.dim,
        embedder=args.embedder,
        split=args.split,
        workdir=Path(args.workdir) if args.workdir else None,
        rescore=not args.no_rescore,
        rerank=args.rerank,
        rerank_top_n=args.rerank_top_n,
        rerank_weights=weights,
        query_ids=query_ids,
        precision=args.precision,
        shards=args.shards,
        detail=detail,
        latency=bool(args.report),
        loaded=loaded,
    )
    result["command"] = "vela " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    status = 0
    if args.run_dir:
        try:
            result["run_files"] = write_trec_runs(Path(args.run_dir), detail)
            result["run_dir"] = args.run_dir
        except ValueError as e:
            print(f"vela eval: --run-dir: {e}", file=sys.stderr)
            status = 1
    print_table(result)
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, (json.dumps(result, indent=2) + "\n").encode())
    if args.report:
        try:
            series = load_baselines(baselines, detail.qrels, MEASURES)
        except ValueError as e:
            print(f"vela eval: --baseline: {e}", file=sys.stderr)
            return 1
        page = write_report(Path(args.report), result=result, detail=detail, baselines=series, measures=MEASURES)
        print(f"report: {page}")
    return status
