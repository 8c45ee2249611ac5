"""The `vela` command. Subcommands import their modules lazily, so `vela --help` stays instant."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from cli.arg_types import positive_int


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vela", description="Vela retrieval service")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP API (embedded default: in-process queue, data in ./.vela)")
    _add_serve_arguments(serve)
    serve.set_defaults(func=_serve)

    worker = sub.add_parser("worker", help="run an indexing worker that takes jobs from Redis (VELA_REDIS_URL)")
    worker.add_argument("--name", default=None, help="consumer name (default host-pid)")
    worker.add_argument("--data-dir", default=None, help="data directory shared with the API")
    worker.set_defaults(func=_worker)

    ingest = sub.add_parser(
        "ingest", help="load a corpus (BEIR folder or JSONL) into a collection, here or on Ray (--ray ADDRESS)"
    )
    _add_ingest_arguments(ingest)
    ingest.set_defaults(func=_ingest)

    ev = sub.add_parser("eval", help="ingest a BEIR-layout dataset and score retrieval (NDCG@10, R@100, MRR@10)")
    ev.add_argument("--data", required=True, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv")
    ev.add_argument("--modes", default="bm25,dense,hybrid", help="comma-separated: bm25, dense, hybrid")
    ev.add_argument("--dim", choices=["full", "256"], default="full", help="dense index to search")
    ev.add_argument(
        "--no-rescore", action="store_true", help="with --dim 256: rank by the 256-d index alone (no full rescore)"
    )
    ev.add_argument("--embedder", default=None, help="a registered name, 'default', or a model folder")
    ev.add_argument("--split", default="test", help="qrels split (default test)")
    ev.add_argument("--json", dest="json_out", default=None, help="write the results JSON here")
    ev.add_argument("--workdir", default=None, help="where the eval collection lives (default <data dir>/eval)")
    ev.add_argument(
        "--shards", type=positive_int, default=1, help="evaluate a collection of this many shards (default 1)"
    )
    ev.add_argument(
        "--rerank",
        default=None,
        metavar="MODEL",
        help="rerank each mode's top N with this reranker (a registered name or a folder)",
    )
    ev.add_argument("--rerank-top-n", type=positive_int, default=50, help="hits the reranker rescores (default 50)")
    ev.add_argument(
        "--rerank-weight",
        default="1",
        help="the cross-encoder's share of the order: 1 its score alone, below 1 a weighted RRF with the fused "
        "order; a comma list scores each weight from the same model scores (the first is the headline)",
    )
    ev.add_argument(
        "--query-ids", default=None, metavar="FILE", help="score only these queries (one id per line), e.g. dev ids"
    )
    ev.add_argument(
        "--precision", choices=["fp32", "bf16"], default=None, help="encoders' precision (default VELA_PRECISION)"
    )
    ev.add_argument(
        "--run-dir",
        default=None,
        metavar="DIR",
        help="write TREC run files here (<mode>-<dim>.run, top 100 per query) and qrels.txt, for trec_eval or "
        "ir-measures",
    )
    ev.add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="write an HTML report here (DIR/index.html): metric bars, per-query NDCG@10 scatters, and the latency "
        "of each query searched alone (an extra pass per mode)",
    )
    ev.add_argument(
        "--baseline",
        action="append",
        default=None,
        metavar="PATH",
        help="with --report, compare with an earlier `--json` file, a run file or a --run-dir folder (repeatable)",
    )
    ev.set_defaults(func=_eval)

    fusion = sub.add_parser(
        "fusion", help="a collection's fusion of dense and BM25: choose it now (no labels), show it"
    )
    _add_fusion_arguments(fusion)
    fusion.set_defaults(func=_fusion)

    adapt = sub.add_parser(
        "adapt",
        help="adapt a collection's embedder to its documents, no labels: vela adapt COLLECTION --out NAME",
    )
    _add_adapt_arguments(adapt)
    adapt.set_defaults(func=_adapt)

    reindex = sub.add_parser(
        "reindex", help="re-embed a collection with another embedder as a new generation, while it serves"
    )
    _add_reindex_arguments(reindex)
    reindex.set_defaults(func=_reindex)

    onnx = sub.add_parser(
        "export-onnx", help="export an embedder to ONNX (int8 by default) as a new embedder directory"
    )
    onnx.add_argument("model", help="'default' or a local model directory")
    onnx.add_argument("--out", required=True, help="directory of the exported embedder")
    onnx.add_argument("--no-quantize", action="store_true", help="keep fp32 weights (no dynamic int8 quantization)")
    onnx.set_defaults(func=_export_onnx)

    from cli.models import add_parser as add_models_parser  # argparse only: the registry is imported on use

    add_models_parser(sub)

    from cli.datasets import add_parser as add_datasets_parser

    add_datasets_parser(sub)

    from cli.snapshot import add_parser as add_snapshot_parser  # argparse only: the client is imported on use

    add_snapshot_parser(sub)

    train = sub.add_parser(
        "train",
        help="train a model: vela train RECIPE --out DIR [--config FILE] [--register NAME] [flags]",
        description="Recipes: " + ", ".join(f"{k} ({v[1]})" for k, v in RECIPES.items()),
    )
    train.add_argument("recipe", choices=sorted(RECIPES), help="what to train")
    train.add_argument("args", nargs=argparse.REMAINDER, help="its own options (vela train RECIPE --help)")
    train.set_defaults(func=_train)

    bench = sub.add_parser(
        "bench",
        help="run a benchmark; prints JSON and writes bench/results/<name>.json",
        description="Benchmarks: " + ", ".join(f"{k} ({v[1]})" for k, v in BENCHES.items()),
    )
    bench.add_argument("name", choices=sorted(BENCHES), help="which benchmark")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="its own options (vela bench NAME --help)")
    bench.set_defaults(func=_bench)
    return parser


# name -> (module with main(argv), what it measures)
BENCHES: dict[str, tuple[str, str]] = {
    "latency": ("bench.latency", "HTTP search latency and QPS per mode and concurrency"),
    "bm25": ("bench.bm25", "our BM25 vs rank_bm25"),
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


def _add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    from cli.serve import add_arguments  # argparse only: the server's imports are in its main

    add_arguments(parser)


def _serve(args: argparse.Namespace) -> int:
    from cli.serve import main as serve_main

    return serve_main(args)


def _worker(args: argparse.Namespace) -> int:
    if args.data_dir:
        os.environ["VELA_DATA_DIR"] = args.data_dir
    from indexing.worker import main as worker_main

    return worker_main(name=args.name)


def _add_ingest_arguments(parser: argparse.ArgumentParser) -> None:
    from cli.ingest import add_arguments  # argparse and tqdm only: the heavy imports are in its main

    add_arguments(parser)


def _ingest(args: argparse.Namespace) -> int:
    if args.data_dir:
        os.environ["VELA_DATA_DIR"] = args.data_dir
    from cli.ingest import main as ingest_main

    return ingest_main(args)


def _add_reindex_arguments(parser: argparse.ArgumentParser) -> None:
    from cli.reindex import add_arguments

    add_arguments(parser)


def _reindex(args: argparse.Namespace) -> int:
    from cli.reindex import main as reindex_main

    return reindex_main(args)


def _eval(args: argparse.Namespace) -> int:
    from cli.evaluate import main as eval_main

    return eval_main(args)


def _add_fusion_arguments(parser: argparse.ArgumentParser) -> None:
    from cli.fusion import add_arguments  # argparse only: the heavy imports are in its main

    add_arguments(parser)


def _fusion(args: argparse.Namespace) -> int:
    from cli.fusion import main as fusion_main

    return fusion_main(args)


def _add_adapt_arguments(parser: argparse.ArgumentParser) -> None:
    from cli.adapt import add_arguments  # its flags come from training.adapt.arguments (no torch)

    add_arguments(parser)


def _adapt(args: argparse.Namespace) -> int:
    from cli.adapt import main as adapt_main

    return adapt_main(args)


def _export_onnx(args: argparse.Namespace) -> int:
    from models.onnx_export import export

    print(export(args.model, args.out, quantize=not args.no_quantize))
    return 0


def _train(args: argparse.Namespace) -> int:
    import importlib

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


def _bench(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module(BENCHES[args.name][0])
    sys.argv = [f"vela bench {args.name}", *args.args]  # what the JSON records as its command
    module.main(args.args)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print(f"vela {args.command}: interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, LookupError) as e:
        # Bad input and the file system's refusals: one line, not a traceback (VELA_DEBUG=1 shows it).
        # Other exceptions are defects and keep their traceback.
        if os.environ.get("VELA_DEBUG"):
            raise
        detail = e.args[0] if isinstance(e, KeyError) and len(e.args) == 1 else e
        print(f"vela {args.command}: {type(e).__name__}: {detail} (VELA_DEBUG=1 shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
