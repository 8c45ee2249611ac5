"""`vela datasets add|list|remove`: the judged query sets a gated reindex may name (`--gate NAME`, or
`"gate": {"dataset": NAME}` in POST /collections/{name}/reindex)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    ds = sub.add_parser("datasets", help="judged query sets for gated reindexes (<data dir>/datasets)")
    ds.add_argument("--data-dir", default=None, help="data directory (default VELA_DATA_DIR or ./.vela)")
    # The same flag after the subcommand too, as every command takes it (not given there: the one before stays).
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument(
        "--data-dir", default=argparse.SUPPRESS, help="data directory (default VELA_DATA_DIR or ./.vela)"
    )
    cmds = ds.add_subparsers(dest="datasets_command", required=True)
    add = cmds.add_parser("add", parents=[after], help="copy a BEIR folder's queries.jsonl and qrels/ in under NAME")
    add.add_argument("name", help="1-64 letters, digits, '-', '_' or '.', not starting with '.'")
    add.add_argument("path", help="a BEIR-layout folder (queries.jsonl, qrels/<split>.tsv)")
    add.set_defaults(func=_add)
    ls = cmds.add_parser("list", parents=[after], help="every dataset: name, splits, queries, judged queries per split")
    ls.set_defaults(func=_list)
    rm = cmds.add_parser("remove", parents=[after], help="delete a dataset")
    rm.add_argument("name")
    rm.set_defaults(func=_remove)


def _data_dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir or os.environ.get("VELA_DATA_DIR") or ".vela").expanduser().resolve()


def _fail(message: str) -> int:
    print(f"vela datasets: {message}", file=sys.stderr)
    return 2


def _add(args: argparse.Namespace) -> int:
    from indexing.datasets import InvalidDataset, register_dataset

    try:
        entry = register_dataset(_data_dir(args), args.name, Path(args.path))
    except InvalidDataset as exc:
        return _fail(str(exc))
    print(json.dumps(asdict(entry)))
    return 0


def _list(args: argparse.Namespace) -> int:
    from indexing.datasets import list_datasets

    entries = list_datasets(_data_dir(args))
    for entry in entries:
        print(json.dumps(asdict(entry)))
    if not entries:  # stdout stays JSON lines (none); a person reading the terminal is told why it is empty
        print(f"no datasets in {_data_dir(args)}: vela datasets add NAME FOLDER registers one", file=sys.stderr)
    return 0


def _remove(args: argparse.Namespace) -> int:
    from indexing.datasets import remove_dataset
    from indexing.gate import UnknownDataset

    try:
        remove_dataset(_data_dir(args), args.name)
    except UnknownDataset:
        return _fail(f"no dataset named {args.name!r}")
    print(json.dumps({"removed": args.name}))
    return 0
