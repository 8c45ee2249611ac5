"""ONNX int8 vs torch for the default embedder: do they embed alike, and which answers one query faster?

Exports the packaged all-MiniLM-L6-v2 to int8 ONNX in a temporary directory as the packaged default is exported
(the int8 query graph of `vela export-onnx default`, plus the documents' per-token int8 graph and the fp32 one),
embeds every SciFact query with both backends and reports the cosine between the two vectors of each query
(min, mean); the same for `--doc-texts` SciFact documents through the document graphs (per-token int8 and fp32
against torch fp32), with the documents/s of the two ONNX document graphs, interleaved over `--doc-rounds`.
Then times single-query encodes (batch of 1) with both backends in this process, interleaved query by query and
alternating which backend goes first, so that load from elsewhere on the machine falls on both alike; then each
backend alone (all its queries in a row), for reference.

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
from models.embedder.onnx_embedder import OnnxEmbedder
from models.onnx_export import export
from velaio.text import passage_text

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


def read_documents(data: Path, n: int) -> list[str]:
    with open(data / "corpus.jsonl") as f:
        docs = [json.loads(line) for line in f if line.strip()][:n]
    return [passage_text(d.get("title") or "", d["text"]) for d in docs]


def document_parity(onnx_dir: Path, torch_emb: Embedder, texts: list[str], rounds: int) -> dict[str, object]:
    """Cosines of each document graph's vectors to torch fp32's, and their documents/s (interleaved rounds)."""
    graphs = {
        "int8_token": OnnxEmbedder.from_dir(onnx_dir, document_precision="auto"),
        "fp32": OnnxEmbedder.from_dir(onnx_dir, document_precision="fp32"),
    }
    want = torch_emb.encode_documents(texts)  # (n, d), unit rows
    out: dict[str, object] = {"documents": len(texts)}
    rates: dict[str, list[float]] = {name: [] for name in graphs}
    for name, e in graphs.items():
        cos = (e.encode_documents(texts) * want).sum(1)  # (n,)
        out[f"{name}_cosine_min"] = round(float(cos.min()), 5)
        out[f"{name}_cosine_mean"] = round(float(cos.mean()), 5)
    for r in range(rounds):
        for name in list(graphs)[:: 1 if r % 2 == 0 else -1]:
            t0 = time.perf_counter()
            graphs[name].encode_documents(texts)
            rates[name].append(len(texts) / (time.perf_counter() - t0))
    for name, per_round in rates.items():
        out[f"{name}_docs_per_s"] = round(float(np.median(per_round)), 1)
    out["speedup_int8_token_vs_fp32"] = round(float(np.median(rates["int8_token"]) / np.median(rates["fp32"])), 2)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SCIFACT, help="BEIR folder with queries.jsonl")
    ap.add_argument("--latency-queries", type=int, default=200, help="single-query encodes timed per backend")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--doc-texts", type=int, default=500, help="SciFact documents for the document graphs' parity")
    ap.add_argument("--doc-rounds", type=int, default=3, help="interleaved rounds timing the two document graphs")
    ap.add_argument("--out", type=Path, default=Path("bench/results/onnx-parity.json"))
    args = ap.parse_args(argv)

    queries = read_queries(args.data)
    with tempfile.TemporaryDirectory(prefix="vela-onnx-") as tmp:
        t0 = time.perf_counter()
        onnx_dir = export("default", str(Path(tmp) / "minilm-onnx-int8"), quantize=True, token_int8_documents=True)
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
        documents = document_parity(
            onnx_dir, backends["torch"], read_documents(args.data, args.doc_texts), args.doc_rounds
        )

    result = {
        "dataset": args.data.name,
        "queries": len(queries),
        "cosine_min": round(float(cos.min()), 5),
        "cosine_mean": round(float(cos.mean()), 5),
        "cosine_p1": round(float(np.percentile(cos, 1)), 5),
        "latency_batch1": {"queries": len(timed), **latency},
        "latency_batch1_each_alone": {"queries": len(timed), **latency_alone},
        "document_graphs": documents,
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
