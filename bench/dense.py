"""Dense search on a large real collection: FAISS flat vs numpy, 256-d + rescore vs full, HNSW vs flat.

The collection is bench/large_corpus.py's (>= 100,000 passages of SciFact, Cranfield and CoSQA, MiniLM
embeddings cached under .vela-bench/), stored as a real Vela collection; each index is built by
one segment and searched through `ShardView.dense`, the code path of /search. Queries are
every query of the three sets (1,938), embedded by the same model.

- flat vs numpy: the flat segment's top-k ids against numpy brute force over the same vectors.
- 256 + rescore vs full, on the flat segment: recall@10 against the exact full-dim top 10, and speed measured
  side by side (alternating passes, best pass kept). The headline `speed_ratio_256_vs_full` is one query per
  call, as a /search request runs; batches of `--batch` queries (what the micro-batcher sends) are extras.
- HNSW: recall@10 against the exact full-dim top 10, queries/s (one query per call) and build time.

    python -m bench.dense --passages 100000 --out bench/results/dense.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import command, machine, write_result
from bench.large_corpus import CACHE, build_collection, load_passages, load_queries

K = 10


def numpy_topk(queries: np.ndarray, vecs: np.ndarray, k: int) -> np.ndarray:
    """Exact top-k rows by inner product, best first, 100 queries at a time."""
    out = []
    for start in range(0, len(queries), 100):
        scores = queries[start : start + 100] @ vecs.T  # (100, N)
        part = np.argpartition(-scores, k, axis=1)[:, :k]  # (100, k) unordered
        order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
        out.append(np.take_along_axis(part, order, axis=1))
    return np.concatenate(out)  # (nq, k)


def top_ids(snap: Any, queries: np.ndarray, dim: str, batch: int = 256) -> list[np.ndarray]:
    return [
        ids for s in range(0, len(queries), batch) for ids, _ in snap.search_dense(queries[s : s + batch], K, dim=dim)
    ]


def recall(found: list[np.ndarray], truth: list[np.ndarray]) -> float:
    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / len(t) for f, t in zip(found, truth, strict=True)]))


def qps(snap: Any, queries: np.ndarray, dim: str, batch: int) -> float:
    """Queries per second through search_dense, `batch` queries per call."""
    t0 = time.perf_counter()
    for s in range(0, len(queries), batch):
        snap.search_dense(queries[s : s + batch], K, dim=dim)
    return len(queries) / (time.perf_counter() - t0)


def side_by_side(runs: dict[str, Any], queries: np.ndarray, batch: int, rounds: int) -> dict[str, float]:
    """Best-of-`rounds` queries/s of each (segment, dim) run, the runs alternating within every round."""
    best = dict.fromkeys(runs, 0.0)
    for _ in range(rounds):
        for name, (snap, dim) in runs.items():
            best[name] = max(best[name], qps(snap, queries, dim, batch))
    return best


class OneSegment:
    """A one-segment published view with the calls this bench makes (the dense search of /search)."""

    def __init__(self, view: Any) -> None:
        seg = view.parts[0].seg
        self.view, self.manifest, self.info = view, view.manifest, seg.info
        self.dense_full, self.dense_ids, self.passages, self.dense_kind = seg.full, seg.pids, view.n_live, seg.kind

    def search_dense(self, q: np.ndarray, k: int, dim: str = "full") -> list[tuple[np.ndarray, np.ndarray]]:
        return self.view.dense(q, k, dim != "full", 4)  # type: ignore[no-any-return]


def build_hnsw(coll: Any, index_dir: Path, params: Any) -> tuple[Any, float]:
    """The same passages as one HNSW segment, built from the doc store as a rebuild does."""
    from indexing.shard_view import ShardView
    from indexing.shard_writer import ShardWriter

    s = coll.settings
    t0 = time.perf_counter()
    writer = ShardWriter(index_dir, dim=s.dim, small_dim=s.small_dim, dense=params, extra={"bm25": s.bm25.to_json()})
    version = writer.commit(coll.docstore, rebuild=True)
    return OneSegment(ShardView.load(index_dir, version)), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--numpy-queries", type=int, default=1000, help="queries checked against numpy brute force")
    ap.add_argument("--batch", type=int, default=32, help="queries per call in the batched timings")
    ap.add_argument("--rounds", type=int, default=3, help="alternating timed passes (best kept)")
    ap.add_argument("--hnsw-m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=200)
    ap.add_argument("--ef-search", type=int, default=128)
    ap.add_argument("--workdir", type=Path, default=None, help="collection data dir (default .vela-bench/dense-N)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/dense.json"))
    args = ap.parse_args(argv)

    from indexing.dense import DenseIndexParams
    from indexing.store import CollectionStore

    workdir = args.workdir or CACHE / f"dense-{args.passages}"
    load_passages(args.passages)  # encodes (once) before anything is timed
    _, queries = load_queries()  # (Q, d)
    t0 = time.perf_counter()
    name = build_collection(workdir, passages=args.passages, dense=DenseIndexParams(kind="flat"))
    coll = CollectionStore(workdir).get(name)
    flat = OneSegment(coll.view())
    collection_s = time.perf_counter() - t0
    assert flat.dense_kind == "flat" and flat.passages == args.passages

    # FAISS flat against numpy brute force over the very vectors the index holds.
    vecs = flat.dense_full.reconstruct_n(0, flat.passages)  # (N, d)
    nq = min(args.numpy_queries, len(queries))
    ref = [flat.dense_ids[r] for r in numpy_topk(queries[:nq], vecs, K)]
    exact = top_ids(flat, queries, "full")  # the truth for every recall below
    equal = [np.array_equal(a, b) for a, b in zip(exact[:nq], ref, strict=True)]

    hnsw_params = DenseIndexParams(
        kind="hnsw", hnsw_m=args.hnsw_m, ef_construction=args.ef_construction, ef_search=args.ef_search
    )
    hnsw_dir = workdir / f"hnsw-index-{os.getpid()}"  # this run's own, so concurrent runs do not collide
    try:
        hnsw, hnsw_wall_s = build_hnsw(coll, hnsw_dir, hnsw_params)
        measure_and_write(args, flat, hnsw, hnsw_wall_s, queries, exact, equal, collection_s)
    finally:
        shutil.rmtree(hnsw_dir, ignore_errors=True)


def measure_and_write(
    args: argparse.Namespace,
    flat: Any,
    hnsw: Any,
    hnsw_wall_s: float,
    queries: np.ndarray,
    exact: list[np.ndarray],
    equal: list[bool],
    collection_s: float,
) -> None:
    from indexing.dense import set_ef_search

    runs = {"flat_full": (flat, "full"), "flat_256": (flat, "small"), "hnsw_full": (hnsw, "full")}
    runs["hnsw_256"] = (hnsw, "small")
    single = side_by_side(runs, queries, 1, args.rounds)
    batched = side_by_side(runs, queries, args.batch, args.rounds)

    sweep = {}
    for ef in (16, 32, 64, 128, 256):
        set_ef_search(hnsw.dense_full, ef)
        sweep[ef] = {"recall10": round(recall(top_ids(hnsw, queries, "full"), exact), 4)}
        sweep[ef]["qps"] = round(max(qps(hnsw, queries, "full", 1) for _ in range(args.rounds)), 1)
    set_ef_search(hnsw.dense_full, args.ef_search)

    r256 = recall(top_ids(flat, queries, "small"), exact)
    info = {"build_s": hnsw.info["build_s"], "params": hnsw.manifest["dense_index"]}
    write_result(
        args.out,
        {
            "passages": flat.passages,
            "queries": len(queries),
            "flat_vs_numpy_topk_equal": all(equal),
            "flat_vs_numpy_queries": len(equal),
            "flat_vs_numpy_equal_fraction": round(float(np.mean(equal)), 4),
            "recall10_256_rescore": round(r256, 4),
            "speed_ratio_256_vs_full": round(single["flat_256"] / single["flat_full"], 2),
            "headline": "flat segment, one query per search_dense call; recall against exact full-dim top 10",
            "speed_ratio_256_vs_full_batched": round(batched["flat_256"] / batched["flat_full"], 2),
            "qps_single": {k: round(v, 1) for k, v in single.items()},
            f"qps_batch{args.batch}": {k: round(v, 1) for k, v in batched.items()},
            "hnsw": {
                "recall10": round(recall(top_ids(hnsw, queries, "full"), exact), 4),
                "qps": round(single["hnsw_full"], 1),
                "build_s": info["build_s"],
                "build_s_means": "one segment: FAISS adds of the full HNSW and 256-d HNSW-SQ graphs, BM25 postings",
                "segment_build_s": round(hnsw_wall_s, 1),
                "recall10_256_rescore": round(recall(top_ids(hnsw, queries, "small"), exact), 4),
                "speed_ratio_vs_flat": round(single["hnsw_full"] / single["flat_full"], 1),
                "params": info["params"],
                "ef_search_sweep": sweep,
            },
            "collection_build_s": round(collection_s, 1),
            "machine": machine(),
            "command": command(),
        },
    )


if __name__ == "__main__":
    main()
