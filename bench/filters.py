"""Filtered search: recall against brute force over the filtered set, and latency next to unfiltered.

Corpus: the first `--passages` passages of bench.large_corpus (real sentences of SciFact, Cranfield and
CoSQA), one document each, embedded once by `--embedder` (default: the int8 ONNX export of the packaged
MiniLM, made with `vela export-onnx default --out .vela-bench/minilm-onnx-int8`) and cached under
.vela-bench/. Each document gets synthetic metadata from a fixed seed:
    tenant     keyword, uniform over 1,000 values   -> one value: 0.1 %, ten values: 1 %
    year       integer, uniform over 2015..2024      -> one year: 10 %
    public     boolean, half true                    -> 50 %
    published  datetime, uniform over 2020..2024     -> a quarter: ~5 %
Two collections hold the same documents and vectors, one with a flat dense index and one with HNSW (m 32,
ef_search 128); the fields are declared (typed columns per segment). Filters: the four selectivities, a
two-clause filter (ten tenants x 10 % AND public) and a datetime range.

Recall@10 per mode against brute force over the passing documents: dense = exact cosines of every passing
vector; bm25 = the engine's own BM25 of every live passage (its scorer is exact), narrowed to the passing
ones; hybrid = RRF (k 60, depth 200) of those two brute-force lists. Latency: the engine call
(indexing.engine.search, query vectors pre-encoded), one query at a time, filtered and unfiltered
alternated, p50 per filter and mode; the ratio to unfiltered is the figure (goal <= 2). A view keeps the row
masks of its 64 most recent filters (as Elasticsearch caches filter bitsets), so the timed searches reuse
them; what building them costs on a filter's first use is reported beside (`first_use_mask_ms`).

    vela bench filters --out bench/results/filters.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import command, machine, write_result
from indexing.ranking import Mode

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".vela-bench"
SCHEMA = {"fields": {"tenant": "keyword", "year": "integer", "public": "boolean", "published": "datetime"}}
FILTERS: dict[str, dict[str, Any]] = {
    "0.1%": {"must": [{"key": "tenant", "match": {"value": "t7"}}]},
    "1%": {"must": [{"key": "tenant", "match": {"any": [f"t{i}" for i in range(10, 20)]}}]},
    "10%": {"must": [{"key": "year", "range": {"gte": 2020, "lt": 2021}}]},
    "50%": {"must": [{"key": "public", "match": {"value": True}}]},
    "two clauses": {
        "must": [
            {"key": "tenant", "match": {"any": [f"t{i}" for i in range(100, 200)]}},
            {"key": "public", "match": {"value": True}},
        ]
    },
    "datetime range": {
        "must": [{"key": "published", "range": {"gte": "2022-04-01T00:00:00Z", "lt": "2022-07-01T00:00:00Z"}}]
    },
}
MODES: tuple[Mode, ...] = ("dense", "bm25", "hybrid")


def metadata(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    tenant = rng.integers(0, 1000, n)
    year = rng.integers(2015, 2025, n)
    public = rng.random(n) < 0.5
    start = np.datetime64("2020-01-01T00:00:00")
    seconds = rng.integers(0, 5 * 365 * 86400, n)
    return [
        {
            "tenant": f"t{t}",
            "year": int(y),
            "public": bool(p),
            "published": str(start + np.timedelta64(int(s), "s")) + "Z",
        }
        for t, y, p, s in zip(tenant, year, public, seconds, strict=True)
    ]


def embed(texts: list[str], embedder_dir: Path, tag: str, queries: bool = False) -> np.ndarray:
    """Vectors of texts, cached under .vela-bench/filters-<tag>/ in parts (a killed run resumes)."""
    from tqdm import tqdm

    from models import EmbedderCache

    folder = CACHE / f"filters-{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    model = EmbedderCache().get(str(embedder_dir))
    chunk = 4096
    parts = []
    with tqdm(total=len(texts), desc=f"embedding {tag}", unit="text") as bar:
        for i in range(0, len(texts), chunk):
            path = folder / f"{i // chunk:05d}.npy"
            if not path.exists():
                part = texts[i : i + chunk]
                vecs = model.encode_queries(part) if queries else model.encode_documents(part, batch_size=64)
                np.save(folder / "tmp.npy", vecs)
                (folder / "tmp.npy").replace(path)
            parts.append(np.load(path))
            bar.update(min(chunk, len(texts) - i))
    return np.concatenate(parts).astype(np.float32)


def build(
    root: Path, name: str, kind: str, rows: list[dict[str, str]], emb: np.ndarray, md: list[dict[str, Any]]
) -> Any:
    from indexing.collection import CollectionSettings
    from indexing.dense import DenseIndexParams
    from indexing.docstore import StoredDocument
    from indexing.prepare import content_hash
    from indexing.store import CollectionStore

    store = CollectionStore(root)
    settings = CollectionSettings(
        name=name,
        embedder="bench",
        dim=int(emb.shape[1]),
        dense_index=DenseIndexParams(kind=kind),
        schema=SCHEMA,
    )
    coll = store.create(settings)
    with coll.writer():
        for start in range(0, len(rows), 20_000):
            docs = []
            for i in range(start, min(start + 20_000, len(rows))):
                doc_id, text = rows[i]["id"], rows[i]["text"]
                h = content_hash({"id": doc_id, "title": "", "text": text, "metadata": md[i]}, settings.chunking)
                docs.append(StoredDocument(doc_id, "", text, md[i], h, [(0, len(text))], emb[i : i + 1]))
            coll.docstore.upsert(docs)
        coll.commit()
    return coll


def brute(view: Any, qv: np.ndarray, query: str, allowed: np.ndarray, k: int) -> dict[str, list[int]]:
    """Brute-force top-k passage ids per mode over the passing documents (one passage per document)."""
    from indexing.bm25 import tokenize
    from indexing.fusion import reciprocal_rank_fusion

    seg = view.parts[0]
    live = seg.live & allowed
    rows = np.flatnonzero(live)
    vecs = seg.seg.vectors(rows).astype(np.float64)
    scores = vecs @ qv.astype(np.float64)
    order = np.lexsort((seg.seg.pids[rows], -scores))
    dense = seg.seg.pids[rows[order]].tolist()
    tokens = tokenize([query])[0]
    stats = view.term_stats(set(tokens))
    ((all_pids, _),) = view.bm25([tokens], stats)  # every live passage with a term, best first
    keep = np.isin(all_pids, seg.seg.pids[rows])
    bm25 = all_pids[keep].tolist()
    fused = reciprocal_rank_fusion({"dense": dense[:200], "bm25": bm25[:200]}, k=60, depth=200)
    return {"dense": dense[:k], "bm25": bm25[:k], "hybrid": [p for p, _ in fused[:k]]}


def run(coll: Any, queries: list[str], qvecs: np.ndarray, rounds: int) -> dict[str, Any]:
    from indexing.engine import LOCAL_FANOUT
    from indexing.engine import search as engine_search
    from indexing.filter_parser import parse_filter
    from indexing.filters import Schema
    from indexing.ranking import RankRequest

    coll.refresh(LOCAL_FANOUT)
    view = coll.view()
    seg = view.parts[0]
    out: dict[str, Any] = {}
    for label, raw in FILTERS.items():
        node = parse_filter(raw, Schema.from_json(SCHEMA))
        allowed = seg.seg.payload.mask(node, view.schema.fields)
        t0 = time.perf_counter()
        view._scope_uncached(node)  # what a filter's first use in a view costs (later uses hit the view's cache)
        build_ms = (time.perf_counter() - t0) * 1000
        res: dict[str, Any] = {
            "selectivity": round(float(allowed[seg.live].mean()), 5),
            "filter": raw,
            "first_use_mask_ms": round(build_ms, 3),
        }
        truths = [brute(view, v, q, allowed, 10) for q, v in zip(queries, qvecs, strict=True)]
        for mode in MODES:
            hits, total = 0, 0
            times: list[float] = []
            base: list[float] = []
            req = RankRequest(mode=mode, k=10, filter=node, group_by_doc=False)
            plain = RankRequest(mode=mode, k=10, group_by_doc=False)
            for qi, (q, v) in enumerate(zip(queries, qvecs, strict=True)):
                qv = v[None] if mode != "bm25" else None
                for r in range(rounds):
                    pair = (("f", req), ("u", plain)) if (qi + r) % 2 == 0 else (("u", plain), ("f", req))
                    for which, rq in pair:
                        t0 = time.perf_counter()
                        (fused,) = engine_search(coll, LOCAL_FANOUT, qv, [q], rq)
                        (times if which == "f" else base).append(time.perf_counter() - t0)
                        if which == "f" and r == 0:
                            truth = truths[qi][mode]
                            hits += len({p for _, _, p in fused.top} & set(truth))
                            total += len(truth)
            p50, b50 = float(np.median(times)) * 1000, float(np.median(base)) * 1000
            res[mode] = {
                "recall_at_10": round(hits / max(total, 1), 4),
                "p50_ms": round(p50, 3),
                "unfiltered_p50_ms": round(b50, 3),
                "ratio_to_unfiltered": round(p50 / b50, 2),
            }
        out[label] = res
        print(label, json.dumps({m: res[m] for m in MODES}), flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100, help="test queries (every query of the three sets, shuffled)")
    ap.add_argument("--rounds", type=int, default=3, help="timed searches per query, filter and mode")
    ap.add_argument("--embedder", type=Path, default=CACHE / "minilm-onnx-int8")
    ap.add_argument("--kinds", default="flat,hnsw")
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/filters.json")
    args = ap.parse_args(argv)
    from bench.large_corpus import all_passages, query_texts

    load0 = os.getloadavg()
    rows = all_passages()[: args.passages]
    qtexts = query_texts()
    rng = np.random.default_rng(1)
    queries = [qtexts[i] for i in rng.permutation(len(qtexts))[: args.queries]]
    emb = embed([r["text"] for r in rows], args.embedder, f"{args.passages}")
    qvecs = embed(queries, args.embedder, f"queries-{args.queries}", queries=True)
    md = metadata(len(rows))
    result: dict[str, Any] = {
        "benchmark": "filters",
        "passages": len(rows),
        "queries": len(queries),
        "embedder": str(args.embedder.relative_to(REPO) if args.embedder.is_relative_to(REPO) else args.embedder),
        "schema": SCHEMA,
    }
    with tempfile.TemporaryDirectory(prefix="vela-filters-") as tmp:
        for kind in args.kinds.split(","):
            t0 = time.perf_counter()
            coll = build(Path(tmp) / kind, f"filters-{kind}", kind, rows, emb, md)
            build_s = time.perf_counter() - t0
            print(f"{kind}: built in {build_s:.0f} s", flush=True)
            result[kind] = {"build_s": round(build_s, 1), "by_filter": run(coll, queries, qvecs, args.rounds)}
    result["targets"] = "recall@10 1.0 flat, >= 0.97 HNSW, every filter and mode; p50 <= 2x unfiltered (goal)"
    result["loadavg_start"] = [round(x, 2) for x in load0]
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result["machine"] = machine()
    result["command"] = command()
    write_result(args.out, result)


if __name__ == "__main__":
    main()
