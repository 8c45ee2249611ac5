"""The `vela` command. Subcommands import their modules lazily, so `vela --help` stays instant."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vela", description="Vela retrieval service")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP API (embedded default: in-process queue, data in ./.vela)")
    serve.add_argument("--host", default=None, help="bind address (default VELA_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default VELA_PORT or 8000)")
    serve.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")
    serve.set_defaults(func=_serve)

    worker = sub.add_parser("worker", help="run an indexing worker that takes jobs from Redis (VELA_REDIS_URL)")
    worker.add_argument("--name", default=None, help="consumer name (default host-pid)")
    worker.add_argument("--data-dir", default=None, help="data directory shared with the API")
    worker.set_defaults(func=_worker)

    ev = sub.add_parser("eval", help="ingest a BEIR-layout dataset and score retrieval (NDCG@10, R@100, MRR@10)")
    ev.add_argument("--data", required=True, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv")
    ev.add_argument("--modes", default="bm25,dense,hybrid", help="comma-separated: bm25, dense, hybrid")
    ev.add_argument("--dim", choices=["full", "256"], default="full", help="dense index to search")
    ev.add_argument(
        "--no-rescore", action="store_true", help="with --dim 256: rank by the 256-d index alone (no full rescore)"
    )
    ev.add_argument("--embedder", default=None, help="'default' or a local model directory")
    ev.add_argument("--split", default="test", help="qrels split (default test)")
    ev.add_argument("--json", dest="json_out", default=None, help="write the results JSON here")
    ev.add_argument("--workdir", default=None, help="where the eval collection lives (default <data dir>/eval)")
    ev.set_defaults(func=_eval)
    return parser


def _serve(args: argparse.Namespace) -> int:
    if args.data_dir:
        os.environ["VELA_DATA_DIR"] = args.data_dir
    import uvicorn

    from indexing.logs import configure_logging
    from service.main import create_app
    from service.settings import Settings

    settings = Settings()
    configure_logging(settings.log_level)
    uvicorn.run(
        create_app(settings),
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_config=None,
        access_log=False,
    )
    return 0


def _worker(args: argparse.Namespace) -> int:
    if args.data_dir:
        os.environ["VELA_DATA_DIR"] = args.data_dir
    from indexing.worker import main as worker_main

    return worker_main(name=args.name)


def _eval(args: argparse.Namespace) -> int:
    from cli.evaluate import main as eval_main

    return eval_main(args)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
