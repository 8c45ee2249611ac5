"""Search latency and throughput through a real uvicorn server, per mode and concurrency.

`vela serve` runs in its own process on loopback; an httpx asyncio driver keeps `concurrency` requests in
flight (closed loop) for `--seconds` per setting. Modes: bm25, dense (full and 256-d + rescore), hybrid.
The same run also measures the bare query encoder (one query per forward pass, in this process, before
the load starts) and, as the baseline of the batching speed-up, the hybrid path with micro-batching turned off
(VELA_QUERY_BATCH_MAX=1: one forward pass per request).

SciFact (the whole corpus, ingested once through the API and kept under .vela-bench/) is the default
collection; `--large` adds the >=100k-passage collection from bench.large_corpus.

    vela bench latency --out bench/results/latency.json [--large]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import (
    closed_loop,
    command,
    free_port,
    machine,
    percentiles,
    start_vela,
    wait_jobs,
    wait_ready,
    write_result,
)

REPO = Path(__file__).resolve().parents[1]
BEIR = REPO.parent / "shared" / "data" / "beir"
CACHE = REPO / ".vela-bench"
MODES: list[tuple[str, str]] = [("bm25", "full"), ("dense", "full"), ("dense", "256"), ("hybrid", "full")]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@contextmanager
def server(data_dir: Path, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    env = {"VELA_DATA_DIR": str(data_dir), "VELA_LOG_LEVEL": "WARNING", **(extra_env or {})}
    proc = start_vela(["serve", "--port", str(port)], env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, timeout=300)
        yield base
    finally:
        proc.terminate()
        proc.wait(60)


def scifact_data_dir(embedder: str) -> Path:
    """SciFact's whole corpus, ingested through the API once per embedder; later runs reuse the data."""
    tag = "default" if embedder == "default" else Path(embedder).name
    data_dir = CACHE / ("scifact-data" if tag == "default" else f"scifact-data-{tag}")
    if (data_dir / "collections" / "scifact" / "index" / "CURRENT").exists():
        return data_dir
    docs = [{"id": d["_id"], "title": d["title"], "text": d["text"]} for d in _jsonl(BEIR / "scifact/corpus.jsonl")]
    with server(data_dir) as base, httpx.Client(base_url=base, timeout=120) as client:
        r = client.post("/index", json={"collection": "scifact", "documents": docs, "embedder": embedder})
        r.raise_for_status()
        (job,) = wait_jobs(client, [r.json()["job_id"]])
        assert job["status"] == "succeeded", job
    return data_dir


def encoder_p50_ms(name: str, queries: list[str], n: int = 200) -> float:
    """The bare query encoder, one query per forward pass: the floor under every dense request."""
    from models import EmbedderCache

    embedder = EmbedderCache().get(name)
    for q in queries[:10]:
        embedder.encode_queries([q])
    times = []
    for q in (queries * (n // len(queries) + 1))[:n]:
        t0 = time.perf_counter()
        embedder.encode_queries([q])
        times.append(time.perf_counter() - t0)
    return round(float(np.percentile(np.asarray(times) * 1000, 50)), 2)


def measure(
    base: str, collection: str, queries: list[str], mode: str, dim: str, concurrency: int, seconds: float
) -> dict[str, Any]:
    def body(i: int) -> dict[str, Any]:
        return {"collection": collection, "query": queries[i % len(queries)], "mode": mode, "dim": dim, "k": 10}

    warm_end = time.time() + 1.0  # connections open, caches warm; not counted
    asyncio.run(closed_loop(base, body, concurrency=concurrency, until=lambda: time.time() > warm_end))
    end = time.time() + seconds
    lat, wall = asyncio.run(closed_loop(base, body, concurrency=concurrency, until=lambda: time.time() > end))
    stats = percentiles(lat)
    return {"mode": mode, "dim": dim, "concurrency": concurrency, **stats, "qps": round(len(lat) / wall, 1)}


def run_collection(
    data_dir: Path,
    collection: str,
    queries: list[str],
    concurrencies: list[int],
    seconds: float,
    baseline_dir: Path | None = None,
) -> dict[str, Any]:
    """Every mode x concurrency on the collection, then the baseline: the same collection (or, with
    `baseline_dir`, SciFact embedded by the torch default) served with micro-batching off."""
    results = []
    with server(data_dir) as base:
        passages = int(httpx.get(f"{base}/collections/{collection}", timeout=30).json()["passages"])
        for mode, dim in MODES:
            for c in concurrencies:
                results.append(measure(base, collection, queries, mode, dim, c, seconds))
                print(json.dumps(results[-1]), flush=True)
    unbatched = []
    with server(baseline_dir or data_dir, {"VELA_QUERY_BATCH_MAX": "1"}) as base:
        for mode in ("dense", "hybrid"):
            for c in sorted({1, 8} & set(concurrencies)):
                unbatched.append(measure(base, collection, queries, mode, "full", c, seconds))
                print(json.dumps({"unbatched": True, **unbatched[-1]}), flush=True)

    def qps(rows: list[dict[str, Any]], mode: str, c: int) -> float:
        return next((r["qps"] for r in rows if r["mode"] == mode and r["dim"] == "full" and r["concurrency"] == c), 0)

    ratios = {
        f"{mode}_c8_qps_vs_unbatched_baseline": round(qps(results, mode, 8) / qps(unbatched, mode, 8), 2)
        for mode in ("dense", "hybrid")
        if qps(unbatched, mode, 8)
    }
    return {
        "collection": collection,
        "passages": passages,
        "results": results,
        "unbatched_baseline": {"embedder": "default (torch)" if baseline_dir else "same", "results": unbatched},
        **ratios,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,8,32", help="comma-separated closed-loop concurrencies")
    ap.add_argument("--seconds", type=float, default=10, help="measured seconds per setting")
    ap.add_argument("--large", action="store_true", help="also the >=100k-passage collection (bench.large_corpus)")
    ap.add_argument("--large-only", action="store_true", help="only the >=100k-passage collection")
    ap.add_argument(
        "--embedder", default="default", help="'default' or an embedder directory (e.g. a `vela export-onnx` one)"
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/latency.json")
    args = ap.parse_args(argv)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    queries = [q["text"] for q in _jsonl(BEIR / "scifact/queries.jsonl")]

    if args.large_only:
        from bench.large_corpus import build_collection, query_texts

        large_dir = CACHE / "large-data"
        name = build_collection(large_dir)
        large = run_collection(large_dir, name, query_texts(), concurrencies, args.seconds)
        large.update(encoder_p50_ms=encoder_p50_ms("default", queries), seconds_per_setting=args.seconds)
        write_result(args.out, {**large, "embedder": "default", "machine": machine(), "command": command()})
        return
    embedder = args.embedder if args.embedder == "default" else str(Path(args.embedder).resolve())
    data_dir = scifact_data_dir(embedder)
    encoder_ms = encoder_p50_ms(embedder, queries)
    # The baseline is the un-batched torch path: SciFact embedded by the torch default.
    baseline = scifact_data_dir("default") if embedder != "default" else None
    out: dict[str, Any] = {
        **run_collection(data_dir, "scifact", queries, concurrencies, args.seconds, baseline),
        "encoder_p50_ms": encoder_ms,
        "seconds_per_setting": args.seconds,
        "embedder": args.embedder,
    }
    if args.large:
        from bench.large_corpus import build_collection, query_texts

        large_dir = CACHE / "large-data"
        name = build_collection(large_dir)
        out["large"] = run_collection(large_dir, name, query_texts(), concurrencies, args.seconds)
    out.update(machine=machine(), command=command())
    write_result(args.out, out)


if __name__ == "__main__":
    main()
