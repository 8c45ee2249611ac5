"""CUDA throughput: encode texts/s, dense search q/s at batch 1 and 64 (GPU copy vs CPU index), training steps/s.

Runs only on a host with CUDA (it refuses otherwise). The encoder is the packaged all-MiniLM-L6-v2 on cuda:0 in
the precision VELA_PRECISION=auto picks there; search is a flat index of random unit vectors (100k x 384 by
default) placed on the GPU by indexing.gpu_index (faiss-gpu, else the torch flat index; the JSON says which);
training is `vela train contrastive` on pairs mined from the corpus, on the same device.

    vela bench gpu --out bench/results/gpu.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.common import command, machine, write_result

SCIFACT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir" / "scifact"


def _texts(data: Path, n: int) -> list[str]:
    if (data / "corpus.jsonl").is_file():
        with open(data / "corpus.jsonl") as f:
            docs = [json.loads(line) for line in f if line.strip()][:n]
        return [f"{d.get('title', '')}\n{d['text']}" for d in docs]
    return [f"synthetic passage {i} about topic {i % 97} and its measurements" for i in range(n)]


def bench_encode(device: str, precision: str, texts: list[str]) -> dict[str, Any]:
    from models import load_embedder

    emb = load_embedder("default", device=device, precision=precision)
    emb.encode_documents(texts[:64])  # warm-up: kernels, allocator
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    emb.encode_documents(texts)
    torch.cuda.synchronize()
    return {"texts": len(texts), "texts_per_s": round(len(texts) / (time.perf_counter() - t0), 1)}


def _qps(index: Any, queries: np.ndarray, batch: int, k: int, seconds: float = 3.0) -> float:
    done, t0, i = 0, time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        q = queries[i : i + batch] if i + batch <= len(queries) else queries[:batch]
        index.search(q, k)
        done, i = done + len(q), (i + batch) % len(queries)
    return round(done / (time.perf_counter() - t0), 1)


def bench_search(device: str, rows: int, dim: int, k: int) -> dict[str, Any]:
    import faiss

    from indexing.gpu_index import GpuSearchIndex, backend, place

    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((rows, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    cpu = faiss.IndexFlatIP(dim)
    cpu.add(vecs)
    gpu = place(cpu, device, min_passages=0)
    queries = rng.standard_normal((4096, dim)).astype(np.float32)
    out: dict[str, Any] = {
        "rows": rows,
        "dim": dim,
        "k": k,
        "on_gpu": isinstance(gpu, GpuSearchIndex),
        "backend": backend(),  # faiss-gpu where faiss has GPU support, else torch (indexing/torch_flat.py)
    }
    for batch in (1, 64):
        out[f"batch_{batch}"] = {"gpu_qps": _qps(gpu, queries, batch, k), "cpu_qps": _qps(cpu, queries, batch, k)}
    return out


def bench_train(data: Path, steps: int, batch_size: int) -> dict[str, Any]:
    from training.contrastive.cli import main as train

    if not (data / "corpus.jsonl").is_file():
        return {"skipped": f"no corpus at {data}"}
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            "--out", tmp, "--model", "default", "--surrogate", "default", "--pairs", f"mine:{data}",
            "--max_pairs", str(steps * batch_size), "--batch_size", str(batch_size), "--max_steps", str(steps),
        ]  # fmt: skip
        if bf16 := torch.cuda.get_device_capability(0)[0] >= 8:
            argv += ["--bf16", "true"]
        assert train(argv) == 0
        record = json.loads((Path(tmp) / "training_args.json").read_text())
    seconds = float(record["train_seconds"])
    return {
        "recipe": "contrastive",
        "steps": record["steps"],
        "batch_size": batch_size,
        "bf16": bf16,
        "steps_per_s": round(record["steps"] / seconds, 2),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SCIFACT, help="BEIR folder for texts and training pairs")
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--train-steps", type=int, default=30)
    ap.add_argument("--train-batch", type=int, default=32)
    ap.add_argument("--out", type=Path, default=Path("bench/results/gpu.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit(
            "vela bench gpu: no CUDA device (torch.cuda.is_available() is False); run it on a GPU host with the "
            "CUDA build of torch and the gpu extra (docs/gpu.md)"
        )
    from models.device import resolve_device, resolve_precision

    device = resolve_device("cuda")
    precision = resolve_precision("auto", device)
    result = {
        "command": command(),
        "machine": {**machine(), "gpu": torch.cuda.get_device_name(0), "torch_cuda": torch.version.cuda},
        "device": device,
        "precision": precision,
        "encode": bench_encode(device, precision, _texts(args.data, args.texts)),
        "search": bench_search(device, args.rows, args.dim, args.k),
        "train": bench_train(args.data, args.train_steps, args.train_batch),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
