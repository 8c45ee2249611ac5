"""`vela token`: make a scoped access token, signed with one of the server's API keys (no server is asked).

    vela token --read notes --expires 12h                      search and read collection notes for 12 hours
    vela token --read notes --filter '{"must": [{"key": "tenant", "match": {"value": "acme"}}]}'
                                                               one tenant's documents of notes, and nothing else
    vela token --write drafts --read notes                     index into drafts, read both

The signing key is VELA_API_KEY (or --key): one of the server's VELA_API_KEYS. The token goes where a key goes
(`Authorization: Bearer`, `X-API-Key`, the client's api_key, the console). Exit 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any

_DURATION = re.compile(r"(\d+)([smhd]?)")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def add_parser(sub: Any) -> None:
    token = sub.add_parser(
        "token",
        help="make a scoped access token (collections, read or read-write, a pinned filter, an expiry)",
        description="A JWT (HS256) signed with one of the server's VELA_API_KEYS; the server checks it, no state.",
    )
    token.add_argument("--read", action="append", default=[], metavar="COLLECTION", help="reach it to read")
    token.add_argument(
        "--write", action="append", default=[], metavar="COLLECTION", help="reach it to read, index, patch, delete"
    )
    token.add_argument(
        "--filter",
        default=None,
        metavar="JSON",
        help="a filter every read of the --read collections is ANDed with (one tenant's documents)",
    )
    token.add_argument("--expires", default=None, metavar="DURATION", help="e.g. 3600, 90m, 12h, 30d; default never")
    token.add_argument("--key", default=None, help="the signing key; default VELA_API_KEY, which is safer")
    token.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"vela token: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from service.access_tokens import TokenError, mint

    key = args.key or os.environ.get("VELA_API_KEY", "")
    if not key:
        return _fail("no signing key: set VELA_API_KEY (one of the server's VELA_API_KEYS) or pass --key")
    if not args.read and not args.write:
        return _fail("name a collection with --read or --write")
    pin: dict[str, Any] | None = None
    if args.filter is not None:
        try:
            pin = json.loads(args.filter)
        except ValueError as exc:
            return _fail(f"--filter is not JSON: {exc}")
        if not isinstance(pin, dict):
            return _fail("--filter must be a JSON object (a filter)")
    expires_at = None
    if args.expires is not None:
        m = _DURATION.fullmatch(args.expires.strip())
        if m is None or int(m.group(1)) <= 0:
            return _fail(f"--expires {args.expires!r}: a positive number of seconds, or with s, m, h or d")
        expires_at = int(time.time()) + int(m.group(1)) * _SECONDS[m.group(2)]
    grants: list[dict[str, Any]] = [{"collection": c, "access": "rw"} for c in dict.fromkeys(args.write)]
    for c in dict.fromkeys(args.read):
        if c in args.write:
            return _fail(f"{c!r} is given with --read and --write: --write reads too")
        grants.append({"collection": c, "access": "r", **({"filter": pin} if pin is not None else {})})
    if pin is not None and not args.read:
        return _fail("--filter pins reads: name the collections it applies to with --read")
    try:
        print(mint(key, grants, expires_at=expires_at))
    except TokenError as exc:
        return _fail(str(exc))
    return 0
