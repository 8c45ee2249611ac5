"""`vela search COLLECTION QUERY`: search a running server's collection from the shell.

    vela search notes "why are there tides" [--mode dense|bm25|hybrid] [-k 10] [--filter JSON] [--group-by FIELD]
                [--json]

Prints one line per hit: its rank, score, document id, title and the start of the passage that matched; --json
prints the API's answer as it is (hits with their text, metadata, passage and ranks, and took_ms). `--filter` is
the API's filter as JSON text (docs/filters.md), checked before any request: text that is no JSON object is refused
in one line (exit 2). Through the Python client, with --url and --api-key and the exit statuses of every command
that talks to a server (cli/remote.py): 2 for an unknown collection or a filter the server refuses.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, cast

from cli.arg_types import int_within
from cli.remote import EXIT_REFUSED, fail, print_json, print_table, server_options, shorten, with_client

if TYPE_CHECKING:
    from vela_client import SearchOptions, VelaClient
    from vela_client.models import Mode

MODES = ("dense", "bm25", "hybrid")
# What a JSON value that is no object is, in JSON's words (bool before int: a bool is an int in Python).
JSON_KINDS = ((bool, "a boolean"), (int | float, "a number"), (str, "a string"), (list, "an array"))
TITLE_CHARS = 30
SNIPPET_CHARS = 60


def add_parser(sub: Any) -> None:
    """The `search` subcommand, on `vela`'s subparsers."""
    search = sub.add_parser(
        "search",
        help="search a running server's collection: rank, score, id, title and snippet per hit",
        parents=[server_options()],
    )
    search.add_argument("collection", help="collection (or alias)")
    search.add_argument("query")
    search.add_argument("--mode", choices=MODES, default=None, help="default: the server's (hybrid)")
    search.add_argument(
        "-k", type=int_within(1, 1000), default=None, metavar="N", help="hits to return, 1 to 1000 (default 10)"
    )
    search.add_argument(
        "--filter",
        default=None,
        metavar="JSON",
        help='a metadata filter, e.g. \'{"key": "topic", "match": {"value": "sea"}}\' (docs/filters.md)',
    )
    search.add_argument(
        "--group-by",
        default=None,
        metavar="FIELD",
        help="at most one hit per value of this metadata field (a nested one by its dotted path)",
    )
    search.add_argument("--json", action="store_true", help="the API's answer as it is: hits in full, took_ms")
    search.set_defaults(func=with_client(_search))


def parse_filter(text: str) -> dict[str, Any] | None:
    """The --filter text as a filter; ValueError with a one-line reason when it is not one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--filter: not JSON ({exc})") from None
    if value is not None and not isinstance(value, dict):
        kind = next(name for types, name in JSON_KINDS if isinstance(value, types))
        raise ValueError(f"--filter: a filter is a JSON object ({{...}}), not {kind}: {shorten(text, 60)}")
    return value


def _search(client: VelaClient, args: argparse.Namespace) -> int:
    try:  # before any request
        where = None if args.filter is None else parse_filter(args.filter)
    except ValueError as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    options: SearchOptions = {}
    if args.mode is not None:
        options["mode"] = cast("Mode", args.mode)
    if args.k is not None:
        options["k"] = args.k
    if where is not None:
        options["filter"] = where
    if args.group_by is not None:
        options["group_by"] = {"key": args.group_by}
    answer = client.search(args.collection, args.query, **options)
    if args.json:
        print_json(answer.model_dump(mode="json"))
        return 0
    if not answer.hits:
        print(f"no hits ({answer.took_ms:.1f} ms)", file=sys.stderr)
        return 0
    rows = [
        (
            str(rank),
            f"{hit.score:.4f}",
            hit.id,
            shorten(hit.title, TITLE_CHARS) or "-",
            shorten(hit.text, SNIPPET_CHARS),
        )
        for rank, hit in enumerate(answer.hits, start=1)
    ]
    print_table(("RANK", "SCORE", "ID", "TITLE", "SNIPPET"), rows, right=frozenset({0, 1}))
    return 0
