"""Sharded on Ray vs one node, on SciFact: identical top-10, ingest docs/s, and the fan-out's latency.

1. One node: the corpus ingested by the normal in-process job (`run_job`) into an unsharded collection.
2. Ray: the same corpus into a collection of `--shards` shards with Ray Data encoder actors
   (`ingest_sharded`) on a two-node loopback cluster this script starts (or on `--address`).
3. Every test query in bm25, dense and hybrid mode, k = 10, against both: the fraction of queries whose
   top-10 is identical (the same ids in the same order; for bm25 and dense also scores within 1e-5).
4. Single-query latency, in this process (query encoding included in both): `search_batch` on the
   unsharded collection vs `sharded_search_batch` through the shard actors; the fan-out's overhead is
   the difference of the p50s.
Also written: bytes per passage of the indexes and doc store (for the memory-per-shard arithmetic).

    vela bench ray-scifact [--max-docs 300 --max-queries 30] [--address HOST:PORT]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import command, machine, write_result
from indexing.collection import Collection, CollectionSettings
from indexing.engine import Fanout as ShardFanout
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStore
from indexing.shards import ShardedCollection
from indexing.store import CollectionStore
from models import EmbedderCache
from service.search import Hit, search_batch
from velaio.beir import read_corpus, read_qrels, read_queries

BEIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir"
MODES = ("bm25", "dense", "hybrid")
BATCH = 64
TOL = 1e-5


def same_top(a: Sequence[Hit], b: Sequence[Hit], *, scores: bool, near_ties: bool = False) -> bool:
    """The same ids in the same order and, with `scores`, scores within TOL position by position.

    `near_ties`: two documents whose scores are within TOL of each other may also trade places (and the last
    place may go to another document scoring within TOL of it). Dense scores agree only to float rounding
    (FAISS sums in a different order for a different number of rows), so documents closer than that can
    come out in either order; BM25 scores are bit-identical and ties are ordered alike, so bm25 needs no
    such allowance."""
    if len(a) != len(b) or (scores and any(abs(x.score - y.score) > TOL for x, y in zip(a, b, strict=True))):
        return False
    if [h.id for h in a] == [h.id for h in b]:
        return True
    if not near_ties:
        return False
    pos_a, pos_b = {h.id: i for i, h in enumerate(a)}, {h.id: i for i, h in enumerate(b)}
    for doc, i in pos_a.items():
        j = pos_b.get(doc)
        other = a[-1].score if j is None else a[j].score  # missing from b: it must tie the cut
        if abs(a[i].score - other) > TOL:
            return False
    return all(doc in pos_a or abs(b[j].score - b[-1].score) <= TOL for doc, j in pos_b.items())


def compare(
    one: Collection, sharded: ShardedCollection, fanout: ShardFanout, embedder: Any, texts: list[str]
) -> dict[str, dict[str, float]]:
    """Per mode, the fraction of queries whose top-10 is identical, strictly and up to near-ties."""
    strict = dict.fromkeys(MODES, 0)
    loose = dict.fromkeys(MODES, 0)
    for mode in MODES:
        for start in range(0, len(texts), BATCH):
            part = texts[start : start + BATCH]
            want = search_batch(collection=one, embedder=embedder, queries=part, k=10, mode=mode)  # type: ignore[arg-type]
            got = search_batch(
                collection=sharded,
                fanout=fanout,
                embedder=embedder,
                queries=part,
                k=10,
                mode=mode,  # type: ignore[arg-type]
            )
            for w, g in zip(want, got, strict=True):
                strict[mode] += same_top(w.hits, g.hits, scores=mode != "hybrid")
                loose[mode] += same_top(w.hits, g.hits, scores=mode != "hybrid", near_ties=mode != "hybrid")
    return {
        "strict": {m: round(v / len(texts), 4) for m, v in strict.items()},
        "near_ties": {m: round(v / len(texts), 4) for m, v in loose.items()},
    }


def latency(
    one: Collection, sharded: ShardedCollection, fanout: ShardFanout, embedder: Any, texts: list[str]
) -> dict[str, dict[str, float]]:
    """p50 of single-query searches, both ways, interleaved so drift in machine load hits both alike."""
    out = {}
    for mode in MODES:
        single: list[float] = []
        fan: list[float] = []
        opts: dict[str, Any] = {"embedder": embedder, "k": 10, "mode": mode}
        for q in texts:
            t0 = time.perf_counter()
            search_batch(collection=one, queries=[q], **opts)
            t1 = time.perf_counter()
            search_batch(collection=sharded, fanout=fanout, queries=[q], **opts)
            single.append((t1 - t0) * 1000)
            fan.append((time.perf_counter() - t1) * 1000)
        p50 = float(np.percentile(single, 50)), float(np.percentile(fan, 50))
        out[mode] = {
            "single_p50_ms": round(p50[0], 2),
            "sharded_p50_ms": round(p50[1], 2),
            "overhead_ms": round(p50[1] - p50[0], 2),
        }
    return out


def bytes_per_passage(coll: ShardedCollection) -> dict[str, float]:
    stats = coll.stats()
    passages = max(stats["passages"], 1)
    # WAL mode: recent pages are still in docs.sqlite3-wal, so both files count.
    docstore = sum(f.stat().st_size for s in coll.shards for f in s.root.glob("docs.sqlite3*"))
    return {"index": round(stats["index"]["bytes"] / passages, 1), "docstore": round(docstore / passages, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=BEIR / "scifact")
    ap.add_argument("--address", default=None, help="an existing Ray cluster (default: start a 2-node loopback one)")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--max-docs", type=int, default=None, help="only the first N documents (smoke runs)")
    ap.add_argument("--max-queries", type=int, default=None, help="only the first N test queries (smoke runs)")
    ap.add_argument("--cpus-per-node", type=int, default=4, help="logical CPUs each loopback node declares")
    ap.add_argument("--embedder", default=os.environ.get("VELA_EMBEDDER", "default"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/ray-scifact.json"))
    args = ap.parse_args(argv)
    logging.getLogger("ray").setLevel(logging.WARNING)

    docs = list(read_corpus(args.data))[: args.max_docs]
    queries = read_queries(args.data)
    texts = [queries[q] for q in read_qrels(args.data, "test") if q in queries][: args.max_queries]
    work = Path(tempfile.mkdtemp(prefix="vela-bench-ray-"))
    store, jobs = CollectionStore(work), JobStore(work / "jobs.sqlite3")
    embedders = EmbedderCache()
    embedder = embedders.get(args.embedder)
    one = store.create(CollectionSettings(name="one", embedder=str(embedder.name), dim=embedder.dim))
    t0 = time.perf_counter()
    job = jobs.create(collection="one", kind=JobKind.UPSERT, payload=docs)
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=embedders) == "succeeded"
    single_s = time.perf_counter() - t0

    from bench.ray_local import local_cluster
    from indexing.ray_ingest import ingest_sharded
    from indexing.ray_shards import RayFanout

    def run(address: str) -> dict[str, Any]:
        sharded = store.create(replace(one.settings, name="sharded", shards=args.shards))
        assert isinstance(sharded, ShardedCollection)
        t0 = time.perf_counter()
        assert ingest_sharded(coll=sharded, documents=docs, address=address)
        ray_s = time.perf_counter() - t0
        fanout = RayFanout(address)
        search_batch(collection=sharded, fanout=fanout, embedder=embedder, queries=texts[:4], k=10)  # warm
        return {
            "top10_identical": compare(one, sharded, fanout, embedder, texts),
            "ingest_docs_per_s": {"ray": round(len(docs) / ray_s, 1), "single": round(len(docs) / single_s, 1)},
            "latency": latency(one, sharded, fanout, embedder, texts),
            "bytes_per_passage": bytes_per_passage(sharded),
            "passages": sharded.stats()["passages"],
        }

    if args.address:
        got = run(args.address)
    else:
        with local_cluster(cpus=args.cpus_per_node) as address:
            got = run(address)
    result = {
        "top10_identical": got["top10_identical"]["strict"],
        # Dense only: documents whose scores differ by less than 1e-5 may trade places (see same_top).
        "top10_identical_up_to_near_ties": got["top10_identical"]["near_ties"],
        "ingest_docs_per_s": got["ingest_docs_per_s"],
        "fanout_p50_ms": got["latency"]["hybrid"]["overhead_ms"],
        "latency_by_mode": got["latency"],
        "documents": len(docs),
        "passages": got["passages"],
        "queries": len(texts),
        "shards": args.shards,
        "cluster": args.address or f"2-node loopback, {args.cpus_per_node} logical CPUs per node",
        "bytes_per_passage": got["bytes_per_passage"],
        "embedder": args.embedder,
        "machine": machine(),
        "command": command(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
