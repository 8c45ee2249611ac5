"""`vela train` and `vela bench`: the recipe and benchmark tables, their subparsers, and what runs them.

Both hand the rest of the command line to a module's own main(argv), imported only when the command runs, so the
tables stay cheap for `vela --help`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

# name -> (module with main(argv), what it measures)
BENCHES: dict[str, tuple[str, str]] = {
    "latency": ("bench.latency", "HTTP search latency and QPS per mode and concurrency"),
    "bm25": ("bench.bm25", "our BM25 vs rank_bm25"),
    "bm25-terms": ("bench.bm25_terms", "BM25 NDCG@10 with single-letter terms (min_token_chars 1) vs the default 2"),
    "bm25-normalize": (
        "bench.bm25_normalize",
        "BM25 NDCG@10 over NFKC-normalised text (new collections) vs the text as is",
    ),
    "abandoned": ("bench.abandoned", "CPU a server spends on batch searches whose client hung up vs answering one"),
    "hydrate": ("bench.hydrate", "search hit hydration: passage slices in SQL vs whole texts, time and bytes"),
    "dense": ("bench.dense", "FAISS flat vs numpy, 256-d + rescore vs full, HNSW"),
    "ingest": ("bench.ingest", "end-to-end ingest vs the bare encoder"),
    "ingest-latency": ("bench.ingest_latency", "search p99 while a large ingest runs vs idle"),
    "ingest-rss": ("bench.ingest_rss", "peak RSS of large ingests"),
    "onnx": ("bench.onnx_parity", "ONNX int8 encoder vs torch: cosine and latency"),
    "encoder-quality": ("bench.encoder_quality", "the default encoder vs torch fp32: NDCG@10 per dataset and mode"),
    "moe-throughput": ("bench.moe_throughput", "upcycled MoE embedder vs its dense source: encode texts/s"),
    "ray-scifact": ("bench.ray_scifact", "sharded on a 2-node Ray cluster vs one node: top-10, ingest, fan-out"),
    "incremental": ("bench.incremental", "POST /index to searchable per 50-doc commit vs a full rebuild; 1M flat"),
    "segments": ("bench.segments", "SciFact in 10 segments vs 1: identical top-10, search p50 ratio"),
    "filters": ("bench.filters", "filtered search: recall@10 vs brute force and p50 vs unfiltered, flat and HNSW"),
    "gpu": ("bench.gpu", "CUDA only: encode texts/s, search q/s at batch 1 and 64, training steps/s"),
    "fusion": ("bench.fusion", "fusion chosen without labels vs dense, BM25, RRF and every candidate: NDCG@10"),
    "peers": ("bench.peers", "vs LanceDB, Qdrant local, Chroma: same vectors; engine and HTTP p50/p99, NDCG@10"),
    "reindex": ("bench.reindex", "reindex SciFact to another embedder under search and write load: errors, p99"),
    "adapt": ("bench.adapt", "vela adapt on SciFact and Cranfield vs untrained, Revela and no teacher: NDCG@10"),
}


# recipe -> (module with main(argv) -> exit code, what it trains). Trainers import torch/transformers lazily.
RECIPES: dict[str, tuple[str, str]] = {
    "contrastive": ("training.contrastive.cli", "bi-encoder, InfoNCE with in-batch negatives"),
    "cde": ("training.cde.cli", "contextual document embedder (two-stage), clustered batches"),
    "reranker": ("training.reranker.cli", "cross-encoder reranker (encoder, causal LM or Mamba backbone)"),
    "condenser": ("training.condenser.cli", "Condenser MLM pretraining of an encoder (head dropped after)"),
    "moe": ("training.moe.cli", "sparse MoE embedder upcycled from a dense encoder, Matryoshka dims"),
    "revela": ("training.revela.cli", "retriever trained through LM in-batch attention (--method replug: REPLUG)"),
}


def add_train_parser(sub: Any) -> None:
    """`vela train RECIPE ...` on `vela`'s subparsers."""
    train = sub.add_parser(
        "train",
        help="train a model: vela train RECIPE --out DIR [--config FILE] [--register NAME] [flags]",
        description="Recipes: " + ", ".join(f"{k} ({v[1]})" for k, v in RECIPES.items()),
    )
    train.add_argument("recipe", choices=sorted(RECIPES), help="what to train")
    train.add_argument("args", nargs=argparse.REMAINDER, help="its own options (vela train RECIPE --help)")
    train.set_defaults(func=run_train)


def add_bench_parser(sub: Any) -> None:
    """`vela bench NAME ...` on `vela`'s subparsers."""
    bench = sub.add_parser(
        "bench",
        help="run a benchmark; prints JSON and writes bench/results/<name>.json",
        description="Benchmarks: " + ", ".join(f"{k} ({v[1]})" for k, v in BENCHES.items()),
    )
    bench.add_argument("name", choices=sorted(BENCHES), help="which benchmark")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="its own options (vela bench NAME --help)")
    bench.set_defaults(func=run_bench)


def run_train(args: argparse.Namespace) -> int:
    from cli.model_names import train_args_with_folders
    from cli.models import check_register_name, register_trained, take_register_flag
    from models.device import DeviceError, pin_visible_device, resolve_device, resolve_precision
    from training.cli_args import device_flags

    try:  # --register NAME: copy the trained model into the registry as NAME once the recipe succeeded
        recipe_args, register_as = take_register_flag(args.args)
        why = check_register_name(register_as) if register_as is not None else None
    except ValueError as e:
        why = str(e)
    if why:
        print(f"vela train: {why}", file=sys.stderr)
        return 2
    try:  # VELA_DEVICE / VELA_PRECISION, resolved before any data or model is read
        device = resolve_device(pin_visible_device(os.environ.get("VELA_DEVICE", "auto")))
        precision = resolve_precision(os.environ.get("VELA_PRECISION", "auto"), device)
    except DeviceError as e:
        print(f"vela train: {e}", file=sys.stderr)
        return 2
    # The reranker recipe has its own --precision flag; the others take HF's --bf16.
    # A registered name where a recipe wants a model folder: its folder (the saved command keeps the name).
    argv = device_flags(
        train_args_with_folders(recipe_args),
        device=device,
        precision=precision,
        precision_flag=args.recipe == "reranker",
    )
    module = importlib.import_module(RECIPES[args.recipe][0])
    sys.argv = [f"vela train {args.recipe}", *recipe_args]  # what the saved arguments record as the command
    status = int(module.main(argv) or 0)
    if status == 0 and register_as is not None:
        return register_trained(register_as, recipe_args)
    return status


def run_bench(args: argparse.Namespace) -> int:
    module = importlib.import_module(BENCHES[args.name][0])
    sys.argv = [f"vela bench {args.name}", *args.args]  # what the JSON records as its command
    status = module.main(args.args)
    # A bench's main returns None (it raises on failure) or its exit status; any other value (a result dict) is 0.
    return status if isinstance(status, int) and not isinstance(status, bool) else 0
