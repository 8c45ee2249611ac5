"""Fusion per collection, chosen without labels: NDCG@10 of dense, BM25, RRF, every candidate fusion and AUTO.

For each dataset (BEIR layout under ../shared/data/beir/), with the default embedder (the packaged MiniLM in
torch fp32, as the eval-*.json files ran it):

1. The corpus is ingested once through the product's own jobs (service.documents + indexing.ingest), the
   automatic choice held off; the seconds are kept with the collection (`.vela-bench/fusion/`).
2. The chooser (indexing/fusion_choice.py) runs on the collection, timed, with an audit hook on `open`
   recording every path under a `qrels` folder the process opens meanwhile (the record, not an assertion).
3. Each test query's dense and BM25 document lists (top `depth`, with scores) come from service.search
   and are cached; every candidate fusion is then computed from them with indexing/fusion.py (the
   functions the engine's fuse() calls) and scored with ir-measures. AUTO is the chooser's pick.
4. A check that the cached-list fusion is the engine's: AUTO's run is also searched through search_batch.

    vela bench fusion --out bench/results/fusion.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import command, machine, write_result

REPO = Path(__file__).resolve().parents[1]
BEIR = REPO.parent / "shared" / "data" / "beir"
CACHE = REPO / ".vela-bench" / "fusion"
DATASETS = ("scifact", "cranfield", "cosqa-dev")
INGEST_CHUNK = 5000  # documents per job, as `vela eval` sends them


def open_state(data_dir: Path, embedder: str) -> Any:
    """The service's state over the bench's data directory, with `embedder` as its default embedder."""
    from service.settings import Settings
    from service.state import build_state

    return build_state(Settings(data_dir=data_dir, embedder=embedder))


def default_embedder_dir() -> str:
    """The packaged MiniLM as torch weights: the embedder the eval-*.json figures were measured with."""
    from models.loading import packaged_minilm_dir

    return str(packaged_minilm_dir())


@contextmanager
def held_choice() -> Iterator[None]:
    """No automatic choice after the bench's own ingest jobs: the bench times the chooser by itself."""
    from indexing import fusion_choice

    before = fusion_choice.AUTO_CHOOSE
    fusion_choice.AUTO_CHOOSE = False
    try:
        yield
    finally:
        fusion_choice.AUTO_CHOOSE = before


def ingest(state: Any, data: Path, embedder: str) -> tuple[Any, float]:
    """The dataset's collection, ingested once; and the seconds that first ingest took."""
    from indexing.ingest import run_job
    from indexing.jobs import JobKind
    from service.documents import get_or_create_collection
    from velaio.beir import read_corpus

    name = f"{data.name}-{hashlib.sha1(embedder.encode()).hexdigest()[:8]}"
    record = CACHE / f"ingest-{name}.json"
    coll = get_or_create_collection(state=state, name=name, embedder=None)  # the state's default: `embedder`
    if record.exists():
        return coll, float(json.loads(record.read_text())["seconds"])
    docs = list(read_corpus(data))
    t0 = time.perf_counter()
    with held_choice():
        for start in range(0, len(docs), INGEST_CHUNK):
            job = state.jobs.create(collection=name, kind=JobKind.UPSERT, payload=docs[start : start + INGEST_CHUNK])
            run_job(job_id=job.id, jobs=state.jobs, collections=state.collections, embedders=state.embedders)
            final = state.jobs.get(job.id)
            if final.status != "succeeded":
                raise RuntimeError(f"ingest job {job.id} ended {final.status}: {final.error}")
    seconds = time.perf_counter() - t0
    record.write_text(json.dumps({"seconds": round(seconds, 1), "documents": len(docs)}) + "\n")
    return coll, seconds


class OpenAudit:
    """Every path under a `qrels` folder this process opens, by phase: an audit hook on `open` (PEP 578)."""

    def __init__(self) -> None:
        self.phase = "start"
        self.opened: dict[str, list[str]] = {}
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and isinstance(args[0], str | bytes | Path):
            path = os.fsdecode(args[0])
            if "qrels" in Path(path).parts:
                self.opened.setdefault(self.phase, []).append(path)


def query_runs(state: Any, coll: Any, queries: dict[str, str], depth: int) -> dict[str, Any]:
    """Each test query's dense and BM25 lists, (doc id, score) top `depth`, by document and by passage
    (passage lists: (passage id, doc id, score)); cached, since embedding the queries is the slow part."""
    from service.search import search_batch

    path = CACHE / f"runs-{coll.name}-d{depth}.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    qids = sorted(queries)
    encoder = state.embedders.get(coll.settings.embedder)
    texts = [queries[q] for q in qids]
    vectors = dict(
        zip(texts, encoder.encode_queries(texts, context=coll.query_context(state.collections.fanout)), strict=True)
    )
    out: dict[str, Any] = {"docs": {}, "passages": {}}
    for grouped, key in ((True, "docs"), (False, "passages")):
        for mode in ("dense", "bm25"):
            for start in range(0, len(qids), 64):
                batch = qids[start : start + 64]
                found = search_batch(
                    collection=coll,
                    embedder=PreEncoded(vectors),
                    queries=[queries[q] for q in batch],
                    k=depth,
                    mode=mode,  # type: ignore[arg-type]
                    group_by_doc=grouped,
                )
                for q, res in zip(batch, found, strict=True):
                    hits = [(h.id, h.score) if grouped else (h.passage_id, h.id, h.score) for h in res.hits]
                    out[key].setdefault(q, {})[mode] = hits
    path.write_text(json.dumps(out))
    return out


class PreEncoded:
    """search_batch's query encoder with the vectors computed up front (one pass for every mode)."""

    def __init__(self, vectors: dict[str, Any]) -> None:
        self.vectors = vectors

    def encode_queries(self, texts: Sequence[str], *, context: Any = None) -> Any:
        import numpy as np

        return np.stack([self.vectors[t] for t in texts])


def fused_run(runs: dict[str, Any], spec: Any, depth: int, *, passages: bool = False) -> dict[str, dict[str, float]]:
    """qid -> {doc: score} of one fusion over the cached lists, top 100, with strictly decreasing scores so
    that ir-measures keeps Vela's order. By passage: fused over passage ids, then each document at its best."""
    from indexing.fusion import fuse_runs

    out = {}
    for qid, lists in runs.items():
        if passages:
            doc_of = {pid: doc for mode in lists.values() for pid, doc, _ in mode}
            scored = {mode: [(pid, score) for pid, _, score in hits] for mode, hits in lists.items()}
            docs = list(dict.fromkeys(doc_of[pid] for pid, _ in fuse_runs(scored, spec, depth=depth)))
        else:
            docs = [
                doc
                for doc, _ in fuse_runs({m: [tuple(h) for h in hits] for m, hits in lists.items()}, spec, depth=depth)
            ]
        out[qid] = {doc: float(100 - i) for i, doc in enumerate(docs[:100])}
    return out


def score(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    import ir_measures

    measures = {"ndcg@10": ir_measures.nDCG @ 10, "mrr@10": ir_measures.RR @ 10, "recall@100": ir_measures.R @ 100}
    agg = ir_measures.calc_aggregate(list(measures.values()), qrels, run)
    return {name: round(float(agg[m]), 4) for name, m in measures.items()}


def evaluate_dataset(
    state: Any, data: Path, embedder: str, audit: OpenAudit, args: argparse.Namespace
) -> dict[str, Any]:
    from indexing.fusion import FusionSpec
    from indexing.fusion_choice import ChoiceParams, candidates, choose_fusion, refresh_choice
    from service.search import search_batch
    from velaio.beir import read_qrels, read_queries

    audit.phase = f"{data.name}: ingest and choose"
    coll, ingest_s = ingest(state, data, embedder)
    encoder = state.embedders.get(coll.settings.embedder)
    fanout = state.collections.fanout
    choice = refresh_choice(coll, encoder, fanout, ChoiceParams(seed=args.seeds[0]))  # stored: AUTO is this
    others = [choose_fusion(coll, encoder, fanout, ChoiceParams(seed=s)) for s in args.seeds[1:]]
    # What the two guards against lexical bias are worth: any line as a query, and the query left in its passage.
    ablations = {
        "any line, no prose filter": choose_fusion(coll, encoder, fanout, ChoiceParams(prose=0.0)),
        "query left in its passage": choose_fusion(coll, encoder, fanout, ChoiceParams(cut=False)),
    }
    audit.phase = f"{data.name}: evaluate"
    qrels = read_qrels(data, "test")
    queries = read_queries(data)
    qrels = {q: r for q, r in qrels.items() if q in queries}
    runs = query_runs(state, coll, {q: queries[q] for q in qrels}, args.depth)
    docs = {q: runs["docs"][q] for q in qrels}
    passages = {q: runs["passages"][q] for q in qrels}
    true = {s.label: score(qrels, fused_run(docs, s, args.depth)) for s in candidates()}
    by_passage = {s.label: score(qrels, fused_run(passages, s, args.depth, passages=True)) for s in candidates()}
    ndcg = {label: m["ndcg@10"] for label, m in true.items()}
    auto = choice.spec.label
    # AUTO through the service's own search path (the stored choice, no fusion in the request), as a check
    # that fusing the cached lists is what the engine does.
    served: dict[str, dict[str, float]] = {}
    qids = list(qrels)
    for start in range(0, len(qids), 64):
        batch = qids[start : start + 64]
        found = search_batch(collection=coll, embedder=encoder, queries=[queries[q] for q in batch], k=100)
        for q, res in zip(batch, found, strict=True):
            served[q] = {h.id: float(100 - i) for i, h in enumerate(res.hits)}
    cached = fused_run(docs, choice.spec, args.depth)
    same_top10 = sum(list(served[q])[:10] == list(cached[q])[:10] for q in qids)
    best = max(ndcg.values())
    return {
        "documents": coll.stats()["documents"],
        "queries": len(qrels),
        "ndcg@10": {"dense": ndcg["dense"], "bm25": ndcg["bm25"], "rrf": ndcg["rrf"], "auto": ndcg[auto]},
        "auto": {
            "fusion": auto,
            "stored": coll.settings.fusion,
            "served": score(qrels, served),
            "same_top10": f"{same_top10}/{len(qids)}",
        },
        "targets": {
            "auto >= max(dense, bm25) - 0.005": ndcg[auto] >= max(ndcg["dense"], ndcg["bm25"]) - 0.005,
        },
        "best_candidate": {"fusion": max(ndcg, key=ndcg.__getitem__), "ndcg@10": best},
        "by_seed": {  # the chooser drawing other documents: how stable the choice is
            str(s): {"fusion": c.spec.label, "ndcg@10": ndcg[c.spec.label]}
            for s, c in zip(args.seeds, [choice, *others], strict=True)
        },
        "ablations": {
            name: {
                "fusion": c.spec.label,
                "ndcg@10": ndcg[c.spec.label],
                "pseudo_ndcg@10": {k: round(c.scores[k], 4) for k in ("dense", "bm25", "rrf")},
            }
            for name, c in ablations.items()
        },
        "choosing_seconds": round(choice.seconds, 2),
        "ingest_seconds": round(ingest_s, 1),
        "choosing_share_of_ingest": round(choice.seconds / ingest_s, 4),
        "pseudo_ndcg@10": {k: round(v, 4) for k, v in choice.scores.items()},
        "candidates": true,
        "fused_by_passage_then_grouped": {k: v["ndcg@10"] for k, v in by_passage.items()},
        "passage_minus_document_ndcg@10": {
            k: round(by_passage[k]["ndcg@10"] - ndcg[k], 4) for k in ndcg if k != "dense" and k != "bm25"
        },
        "spec_default": FusionSpec().label,
    }


def seed_targets(sets: dict[str, Any], seed: str) -> dict[str, Any]:
    """Both targets for the choice one chooser seed made on every set."""
    auto = {name: r["by_seed"][seed]["ndcg@10"] for name, r in sets.items()}
    floor = {name: max(r["ndcg@10"]["dense"], r["ndcg@10"]["bm25"]) - 0.005 for name, r in sets.items()}
    mean = sum(auto.values()) / len(auto)
    rrf = sum(r["ndcg@10"]["rrf"] for r in sets.values()) / len(sets)
    return {
        "mean_auto_ndcg@10": round(mean, 4),
        "auto >= max(dense, bm25) - 0.005 on each set": all(auto[n] >= floor[n] for n in sets),
        "mean auto >= mean rrf + 0.02": mean >= rrf + 0.02,
    }


def main(argv: list[str] | None = None) -> None:
    global CACHE
    parser = argparse.ArgumentParser(prog="vela bench fusion", description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--beir", default=str(BEIR))
    parser.add_argument("--depth", type=int, default=200, help="each list's depth before fusion (the default)")
    parser.add_argument("--seeds", default="0,1,2", help="chooser seeds: the first is AUTO, the others stability")
    parser.add_argument("--ingest-only", action="store_true", help="build the collections and stop")
    parser.add_argument("--cache", default=str(CACHE), help="collections, ingest times and run lists")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "fusion.json"))
    args = parser.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    audit = OpenAudit()  # first: nothing before it goes unrecorded
    CACHE = Path(args.cache)
    CACHE.mkdir(parents=True, exist_ok=True)
    embedder = default_embedder_dir()
    state = open_state(CACHE / "data", embedder)
    if args.ingest_only:
        for name in args.datasets.split(","):
            coll, seconds = ingest(state, Path(args.beir) / name, embedder)
            print(f"{name}: {coll.stats()['documents']} documents, ingest {seconds:.1f} s", file=sys.stderr)
        return
    sets = {
        name: evaluate_dataset(state, Path(args.beir) / name, embedder, audit, args)
        for name in args.datasets.split(",")
    }
    mean = {
        m: round(sum(r["ndcg@10"][m] for r in sets.values()) / len(sets), 4) for m in ("dense", "bm25", "rrf", "auto")
    }
    write_result(
        Path(args.out),
        {
            "bench": "fusion",
            "command": command(),
            "machine": machine(),
            "embedder": embedder,
            "depth": args.depth,
            "mean_ndcg@10": mean,
            "targets": {
                "auto >= max(dense, bm25) - 0.005 on each set": all(
                    r["targets"]["auto >= max(dense, bm25) - 0.005"] for r in sets.values()
                ),
                "mean auto >= mean rrf + 0.02": mean["auto"] >= mean["rrf"] + 0.02,
            },
            "targets_by_seed": {str(seed): seed_targets(sets, str(seed)) for seed in args.seeds},
            "qrels_opened": {
                "how": "sys.addaudithook on open, from the start of the run; each path under a qrels folder, by phase",
                "while_ingesting_and_choosing": {k: v for k, v in audit.opened.items() if k.endswith("choose")},
                "while_evaluating": {k: sorted(set(v)) for k, v in audit.opened.items() if k.endswith("evaluate")},
            },
            "datasets": sets,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
