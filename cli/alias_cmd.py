"""`vela alias list|set|delete`: a running server's aliases (names that point at a collection) from the shell.

    vela alias list [--json]                  every alias and its collection
    vela alias set notes-live notes-0301      create it, or switch it at once (searches see the old or the new one)
    vela alias delete notes-live              the alias only: its collection stays

Through the Python client, with --url and --api-key and the exit statuses of every command that talks to a server
(cli/remote.py): 2 for an unknown alias or collection, 3 for an alias named as a collection is.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cli.remote import Action, print_json, print_table, server_options, with_client

if TYPE_CHECKING:
    from vela_client import VelaClient


def add_parser(sub: Any) -> None:
    """The `alias` subcommand and its own subcommands, on `vela`'s subparsers."""
    alias = sub.add_parser("alias", help="a running server's collection aliases: list, set (create or switch), delete")
    cmds = alias.add_subparsers(dest="alias_command", required=True)
    server = server_options()

    def command(name: str, action: Action, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = cmds.add_parser(name, help=help, parents=[server])
        parser.set_defaults(func=with_client(action))
        return parser

    ls = command("list", _list, "every alias and the collection it points at")
    ls.add_argument("--json", action="store_true", help="the aliases as the API returns them, a JSON list")
    put = command("set", _set, "point an alias at a collection: created, or switched in one atomic step")
    put.add_argument("alias")
    put.add_argument("collection")
    delete = command("delete", _delete, "remove an alias (its collection stays)")
    delete.add_argument("alias")


def _list(client: VelaClient, args: argparse.Namespace) -> int:
    aliases = sorted(client.list_aliases(), key=lambda a: a.alias)
    if args.json:
        print_json([a.model_dump(mode="json") for a in aliases])
    elif not aliases:
        print("no aliases", file=sys.stderr)
    else:
        print_table(("ALIAS", "COLLECTION"), [(a.alias, a.collection) for a in aliases])
    return 0


def _set(client: VelaClient, args: argparse.Namespace) -> int:
    from vela_client import NotFound

    try:
        before: str | None = client.get_alias(args.alias).collection
    except NotFound:
        before = None
    after = client.set_alias(args.alias, args.collection)
    was = "" if before is None else " (unchanged)" if before == after.collection else f" (was {before})"
    print(f"{after.alias} -> {after.collection}{was}")
    return 0


def _delete(client: VelaClient, args: argparse.Namespace) -> int:
    client.delete_alias(args.alias)
    print(f"deleted alias {args.alias}")
    return 0
