"""ONNX int8 vs torch for the default embedder: do they embed alike, and which answers one query faster?

Exports the packaged all-MiniLM-L6-v2 to int8 ONNX in a temporary directory (what `vela export-onnx
default` does), embeds every SciFact query with both backends and reports the cosine between the two
vectors of each query (min, mean). Then times single-query encodes (batch of 1) with both backends in this
process, interleaved query by query and alternating which backend goes first, so that load from elsewhere
on the machine falls on both alike; then each backend alone (all its queries in a row), for reference.

    python -m bench.onnx_parity --out bench/results/onnx-parity.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.common import command, machine, write_result
from models import Embedder, load_embedder
from models.onnx_export import export

SCIFACT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir" / "scifact"


def read_queries(data: Path) -> list[str]:
    with open(data / "queries.jsonl") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def single_query_latency(
    backends: dict[str, Embedder], queries: list[str], warmup: int, *, interleave: bool
) -> dict[str, float]:
    """p50/p95 of encoding one query at a time; interleaved query by query, or each backend in turn."""
    for q in queries[:warmup]:
        for e in backends.values():
            e.encode_queries([q])
    times: dict[str, list[float]] = {name: [] for name in backends}
    names = list(backends)
    if interleave:
        plan = [(name, q) for i, q in enumerate(queries) for name in (names if i % 2 == 0 else names[::-1])]
    else:
        plan = [(name, q) for name in names for q in queries]
    for name, q in plan:
        t0 = time.perf_counter()
        backends[name].encode_queries([q])
        times[name].append(time.perf_counter() - t0)
    out: dict[str, float] = {}
    for name, t in times.items():
        ms = np.asarray(t) * 1000.0
        out[f"{name}_p50_ms"] = round(float(np.percentile(ms, 50)), 2)
        out[f"{name}_p95_ms"] = round(float(np.percentile(ms, 95)), 2)
    out["speedup_p50"] = round(out[f"{names[0]}_p50_ms"] / out[f"{names[1]}_p50_ms"], 2)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SCIFACT, help="BEIR folder with queries.jsonl")
    ap.add_argument("--latency-queries", type=int, default=200, help="single-query encodes timed per backend")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path("bench/results/onnx-parity.json"))
    args = ap.parse_args(argv)

    queries = read_queries(args.data)
    with tempfile.TemporaryDirectory(prefix="vela-onnx-") as tmp:
        t0 = time.perf_counter()
        onnx_dir = export("default", str(Path(tmp) / "minilm-onnx-int8"), quantize=True)
        export_s = time.perf_counter() - t0
        backends = {"torch": load_embedder("default"), "onnx": load_embedder(onnx_dir)}
        onnx_mb = (onnx_dir / "model.onnx").stat().st_size / 2**20

        want = backends["torch"].encode_queries(queries)  # (n, d), unit rows
        got = backends["onnx"].encode_queries(queries)  # (n, d), unit rows
        cos = (want * got).sum(1)  # (n,)
        timed = queries[: args.latency_queries]
        latency = single_query_latency(backends, timed, args.warmup, interleave=True)
        # Each backend alone as well: in a process that holds one backend, nothing else shares its cores.
        latency_alone = single_query_latency(backends, timed, args.warmup, interleave=False)

    result = {
        "dataset": args.data.name,
        "queries": len(queries),
        "cosine_min": round(float(cos.min()), 5),
        "cosine_mean": round(float(cos.mean()), 5),
        "cosine_p1": round(float(np.percentile(cos, 1)), 5),
        "latency_batch1": {"queries": len(timed), **latency},
        "latency_batch1_each_alone": {"queries": len(timed), **latency_alone},
        "onnx_precision": backends["onnx"].precision,
        "onnx_model_mb": round(onnx_mb, 1),
        "export_seconds": round(export_s, 1),
        "threads": torch.get_num_threads(),  # torch's, and the ONNX session's intra-op pool follows it
        "machine": machine(),
        "command": command(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
