"""The `vela` command. Subcommands import their modules lazily, so `vela --help` stays instant."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from cli.arg_types import positive_int
from cli.stdout import quiet_exit, reader_gone
from cli.train_bench import BENCHES, RECIPES, add_bench_parser, add_train_parser

# BENCHES and RECIPES are read from here too (tests/bench): they stay importable from cli.main.
__all__ = ["BENCHES", "RECIPES", "build_parser", "main"]


def _version() -> str:
    """The installed package's version (the project's pyproject.toml), or "unknown" outside an install."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vela")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vela", description="Vela retrieval service")
    parser.add_argument("--version", action="version", version=f"vela {_version()}")
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
    onnx.add_argument("model", help="a registered embedder's name, 'default', or a model folder")
    onnx.add_argument("--out", required=True, help="directory of the exported embedder")
    onnx.add_argument("--no-quantize", action="store_true", help="keep fp32 weights (no dynamic int8 quantization)")
    onnx.set_defaults(func=_export_onnx)

    from cli.models import add_parser as add_models_parser  # argparse only: the registry is imported on use

    add_models_parser(sub)

    from cli.datasets import add_parser as add_datasets_parser

    add_datasets_parser(sub)

    # The commands that talk to a running server: argparse only here, the client is imported on use (cli/remote.py).
    from cli import alias_cmd, collections_cmd, jobs_cmd, search_cmd, snapshot, token_cmd

    for remote in (snapshot, jobs_cmd, collections_cmd, alias_cmd, search_cmd):
        remote.add_parser(sub)
    token_cmd.add_parser(sub)  # signs with a key here: talks to no server

    add_train_parser(sub)
    add_bench_parser(sub)
    return parser


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
    from cli.eval_flags import refused  # the flags first: cli.evaluate imports torch, seconds before any refusal

    why = refused(args)
    if why:
        print(f"vela eval: {why}", file=sys.stderr)
        return 2
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
    from cli.model_names import ModelRefused, resolve_model
    from models.onnx_export import export

    try:  # the same names as eval, ingest and adapt take, refused in the same words before any work
        choice = resolve_model(args.model, kind="embedder", flag="MODEL")
    except ModelRefused as e:
        print(f"vela export-onnx: {e}", file=sys.stderr)
        return 2
    print(export(choice.load, args.out, quantize=not args.no_quantize))
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
    except BrokenPipeError as e:
        if reader_gone():  # `vela ... | head`: the reader has what it wanted
            return quiet_exit()
        if os.environ.get("VELA_DEBUG"):
            raise
        return _refused(args.command, e)
    except (OSError, ValueError, LookupError) as e:
        # Bad input and the file system's refusals: one line, not a traceback (VELA_DEBUG=1 shows it).
        # Other exceptions are defects and keep their traceback.
        if os.environ.get("VELA_DEBUG"):
            raise
        return _refused(args.command, e)


def _refused(command: str, e: Exception) -> int:
    detail = e.args[0] if isinstance(e, KeyError) and len(e.args) == 1 else e
    print(f"vela {command}: {type(e).__name__}: {detail} (VELA_DEBUG=1 shows where)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
