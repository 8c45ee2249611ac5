"""`vela fusion`: a collection's fusion of dense and BM25 lists, chosen again without labels, or shown.

    vela fusion choose COLLECTION [--samples 200] [--seed 0]   choose now and store the choice
    vela fusion show COLLECTION                                print the stored choice

Ingest jobs choose by themselves each time a collection doubles; `choose` is for doing it now (after a large
delete, or with more pseudo-queries). A running server picks the new choice up with its settings reader.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")
    sub = parser.add_subparsers(dest="fusion_command", required=True)
    choose = sub.add_parser("choose", help="choose the collection's fusion now (pseudo-queries, no labels)")
    choose.add_argument("collection")
    choose.add_argument("--samples", type=int, default=200, help="pseudo-queries, one per sampled document")
    choose.add_argument("--seed", type=int, default=0, help="which documents are sampled")
    choose.add_argument(
        "--data-dir", default=argparse.SUPPRESS, help="data directory (default VELA_DATA_DIR or ./.vela)"
    )
    show = sub.add_parser("show", help="print the collection's stored fusion")
    show.add_argument("collection")
    show.add_argument("--data-dir", default=argparse.SUPPRESS, help="data directory (default VELA_DATA_DIR or ./.vela)")


def main(args: argparse.Namespace) -> int:
    if args.data_dir:
        os.environ["VELA_DATA_DIR"] = str(Path(args.data_dir))
    from indexing.collection import CollectionNotFound
    from indexing.fusion_choice import ChoiceParams, refresh_choice
    from service.settings import Settings
    from service.state import build_state

    state = build_state(Settings())
    try:
        coll = state.collections.get(args.collection)
    except CollectionNotFound:
        print(f"vela fusion: no collection named {args.collection!r}", file=sys.stderr)
        return 2
    if args.fusion_command == "show":
        print(json.dumps(coll.settings.fusion, indent=2))
        return 0
    if args.samples < 1:
        print("vela fusion: --samples must be at least 1", file=sys.stderr)
        return 2
    embedder = state.embedders.get(coll.settings.embedder)
    choice = refresh_choice(
        coll, embedder, state.collections.fanout, ChoiceParams(samples=args.samples, seed=args.seed)
    )
    ranked = sorted(choice.scores.items(), key=lambda kv: -kv[1])
    print(json.dumps({"fusion": coll.settings.fusion, "pseudo_ndcg@10": dict(ranked)}, indent=2))
    return 0
