"""`vela collections list|show|delete`: a running server's collections from the shell.

    vela collections list [--json]            name, documents, passages, shards, embedder, created, aliases
    vela collections show notes [--json]      counts, embedder, dims, chunking, index, fusion, schema, generations
    vela collections delete notes [--yes]     its documents and indexes, its pending jobs and its aliases go with it

`delete` asks for confirmation when standard input is a terminal; otherwise (a script, a pipe, cron) it refuses
without --yes (exit 2), before any request. Through the Python client, with --url and --api-key and the exit
statuses of every command that talks to a server (cli/remote.py): 2 for an unknown collection, 3 for deleting
through an alias (a collection is deleted by its own name), 130 for a deletion declined at the prompt.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cli.remote import (
    EXIT_CANCELLED,
    EXIT_REFUSED,
    Action,
    fail,
    human_size,
    local_time,
    print_fields,
    print_json,
    print_table,
    server_options,
    with_client,
)

if TYPE_CHECKING:
    from vela_client import Collection, VelaClient


def add_parser(sub: Any) -> None:
    """The `collections` subcommand and its own subcommands, on `vela`'s subparsers."""
    collections = sub.add_parser("collections", help="a running server's collections: list, show, delete")
    cmds = collections.add_subparsers(dest="collections_command", required=True)
    server = server_options()

    def command(name: str, action: Action, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = cmds.add_parser(name, help=help, parents=[server])
        parser.set_defaults(func=with_client(action))
        return parser

    ls = command("list", _list, "every collection: documents, passages, shards, embedder, created, aliases")
    ls.add_argument("--json", action="store_true", help="the collections as the API lists them, a JSON list")
    show = command("show", _show, "one collection: counts, embedder, dims, chunking, index, fusion, schema")
    show.add_argument("name", help="collection (or alias)")
    show.add_argument("--json", action="store_true", help="the collection as the API returns it")
    delete = command("delete", _delete, "delete a collection, its documents and indexes (asks first on a terminal)")
    delete.add_argument("name", help="the collection's own name (not an alias)")
    delete.add_argument("--yes", action="store_true", help="do not ask (needed when standard input is no terminal)")


def _dumped(collection: Collection) -> dict[str, Any]:
    return collection.model_dump(mode="json", by_alias=True)  # `schema`, as the API spells it


def _list(client: VelaClient, args: argparse.Namespace) -> int:
    collections = sorted(client.list_collections(), key=lambda c: c.name)
    if args.json:
        print_json([_dumped(c) for c in collections])
        return 0
    if not collections:
        print("no collections", file=sys.stderr)
        return 0
    header = ("NAME", "DOCUMENTS", "PASSAGES", "SHARDS", "EMBEDDER", "CREATED", "ALIASES")
    rows = [
        (
            c.name,
            str(c.documents),
            str(c.passages),
            str(c.shards),
            c.embedder,
            local_time(c.created_at, seconds=False),
            ",".join(c.aliases) or "-",
        )
        for c in collections
    ]
    print_table(header, rows, right=frozenset({1, 2, 3}))
    return 0


def _inline(values: Mapping[str, Any]) -> str:
    """`{"max_tokens": 224, "overlap": 32}` as `max_tokens 224, overlap 32`; nested values as JSON."""
    parts = [f"{k} {v if isinstance(v, str | int | float | bool) else json.dumps(v)}" for k, v in values.items()]
    return ", ".join(parts) or "-"


def _index(index: Mapping[str, Any]) -> str:
    parts = []
    if isinstance(index.get("segments"), int):
        parts.append(f"{index['segments']} segment{'s' if index['segments'] != 1 else ''}")
    if isinstance(index.get("bytes"), int):
        parts.append(human_size(index["bytes"]))
    if index.get("deleted_rows"):
        parts.append(f"{index['deleted_rows']} deleted rows")
    dense, bm25 = index.get("dense"), index.get("bm25")
    if isinstance(dense, Mapping) and dense.get("kind"):
        parts.append(f"dense {dense['kind']}")
    if isinstance(bm25, Mapping) and bm25.get("method"):
        parts.append(f"bm25 {bm25['method']}")
    return ", ".join(parts) or "-"


def _schema(schema: Mapping[str, Any]) -> str:
    fields = schema.get("fields") or {}
    if not fields:
        return "no declared fields"
    declared = ", ".join(f"{name} {kind}" for name, kind in fields.items())
    return declared + (" (strict)" if schema.get("strict") else "")


def _generations(generations: Mapping[str, Any]) -> str:
    def one(which: str) -> str:
        gen = generations.get(which)
        if not isinstance(gen, Mapping):
            return f"{which} -"
        name = gen.get("embedder_name") or gen.get("embedder") or "?"
        return f"{which} {gen.get('generation', '?')} ({name})"

    return "; ".join(one(which) for which in ("current", "previous", "building"))


def collection_fields(collection: Collection, aliases: list[str], asked_as: str) -> list[tuple[str, str]]:
    """What `vela collections show` prints of a collection."""
    name = collection.name + ("" if asked_as == collection.name else f" (through the alias {asked_as})")
    fields = [
        ("name", name),
        ("aliases", ", ".join(aliases) or "-"),
        ("documents", str(collection.documents)),
        ("passages", str(collection.passages)),
        ("shards", str(collection.shards)),
        ("embedder", collection.embedder),
        ("dims", _inline(collection.dims)),
        ("chunking", _inline(collection.chunking)),
        ("index", _index(collection.index)),
        ("fusion", _inline(collection.fusion)),
        ("schema", _schema(collection.schema_)),
    ]
    if collection.generations:
        fields.append(("generations", _generations(collection.generations)))
    fields.append(("created", local_time(collection.created_at)))
    return fields


def _show(client: VelaClient, args: argparse.Namespace) -> int:
    collection = client.get_collection(args.name)
    if args.json:
        print_json(_dumped(collection))
    else:
        print_fields(collection_fields(collection, collection.aliases, args.name))
    return 0


def _confirmed(client: VelaClient, name: str) -> bool:
    """Ask on the terminal: the collection's counts and aliases, then y or n (anything but y is no)."""
    collection = client.get_collection(name)  # an unknown name is refused here, before the question
    if collection.name != name:
        return True  # an alias: the server refuses it (a conflict), there is nothing to ask
    going = f"; its aliases go with it: {', '.join(collection.aliases)}" if collection.aliases else ""
    question = (
        f"Delete collection {name!r} ({collection.documents} documents, {collection.passages} passages{going})? "
        "This cannot be undone. [y/N] "
    )
    print(question, end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not answer.endswith("\n"):  # end of input (Ctrl-D): the terminal echoed no newline
        print(file=sys.stderr)
    return answer.strip().lower() in ("y", "yes")


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # closed
        return False


def _delete(client: VelaClient, args: argparse.Namespace) -> int:
    if not args.yes:
        if not _stdin_is_terminal():
            message = f"refusing to delete collection {args.name!r} without --yes: standard input is not a terminal"
            return fail(args, message, EXIT_REFUSED)
        if not _confirmed(client, args.name):
            return fail(args, f"not deleted: {args.name!r} stays", EXIT_CANCELLED)
    client.delete_collection(args.name)
    print(f"deleted collection {args.name}")
    return 0
