"""Encode throughput of an upcycled MoE embedder vs the dense encoder it came from.

Upcycles the packaged all-MiniLM-L6-v2 (every second FFN from layer 2 becomes E experts, top-k routing) into a
temporary directory, loads both with `load_embedder` (what the service does) and embeds the same SciFact
passages with `encode_documents`. The two are timed in alternating rounds, so load from elsewhere on the
machine falls on both alike; texts/s is the median over rounds. An upcycled model embeds exactly like the
dense one until it is trained (top-2 weights renormalised), so the cosine between the two is reported too.

    python -m bench.moe_throughput --out bench/results/moe-throughput.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer

from bench.common import command, machine, write_result
from models import EmbedderConfig, load_embedder, resolve_model_dir
from models.moe import MoeModel

SCIFACT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir" / "scifact"


def read_passages(data: Path, n: int) -> list[str]:
    with open(data / "corpus.jsonl") as f:
        docs = [json.loads(line) for line in f if line.strip()][:n]
    return [f"{d.get('title', '')}\n{d['text']}" for d in docs]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SCIFACT)
    ap.add_argument("--passages", type=int, default=256, help="passages embedded per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num-experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=128, help="tokens per passage")
    ap.add_argument("--out", type=Path, default=Path("bench/results/moe-throughput.json"))
    args = ap.parse_args(argv)

    texts = read_passages(args.data, args.passages)
    src = resolve_model_dir("default")
    with tempfile.TemporaryDirectory(prefix="vela-moe-") as tmp:
        moe = MoeModel.upcycle(str(src), num_experts=args.num_experts, top_k=args.top_k)
        counts = moe.parameter_counts()
        moe.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(src).save_pretrained(tmp)
        config = EmbedderConfig.from_dir(src)
        EmbedderConfig.from_dict({**config.to_dict(), "max_length": args.max_length}).save(tmp)
        dense_dir = Path(tmp) / "dense"
        dense_dir.mkdir()
        for f in src.iterdir():
            if f.is_file():
                (dense_dir / f.name).write_bytes(f.read_bytes())
        EmbedderConfig.from_dict({**config.to_dict(), "max_length": args.max_length}).save(dense_dir)
        models = {"dense": load_embedder(dense_dir), "moe": load_embedder(tmp)}
        for m in models.values():  # warm-up: first calls allocate
            m.encode_documents(texts[:32])
        rates: dict[str, list[float]] = {k: [] for k in models}
        vecs: dict[str, np.ndarray] = {}
        for r in range(args.rounds):
            for name in list(models)[:: 1 if r % 2 == 0 else -1]:
                t0 = time.perf_counter()
                vecs[name] = models[name].encode_documents(texts)  # (n, d)
                rates[name].append(len(texts) / (time.perf_counter() - t0))
    dense_rate, moe_rate = (statistics.median(rates[k]) for k in ("dense", "moe"))
    cos = (vecs["dense"] * vecs["moe"]).sum(1)  # (n,)
    dense_params = sum(p.numel() for p in models["dense"].model.parameters())
    result = {
        "dataset": args.data.name,
        "passages": len(texts),
        "max_length": args.max_length,
        "texts_per_s": {"dense": round(dense_rate, 1), "moe": round(moe_rate, 1)},
        "moe_over_dense": round(moe_rate / dense_rate, 3),
        "rounds": {k: [round(x, 1) for x in v] for k, v in rates.items()},
        "parameters": {"dense": dense_params, "moe_total": counts["total"], "moe_active": counts["active"]},
        "experts": args.num_experts,
        "top_k": args.top_k,
        "cosine_untrained_moe_vs_dense_min": round(float(cos.min()), 5),
        "threads": torch.get_num_threads(),
        "machine": machine(),
        "command": command(),
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
