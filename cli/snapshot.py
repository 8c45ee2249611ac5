"""`vela snapshot create|list|download|delete|restore|upload`: a running server's snapshots from the shell.

    vela snapshot create notes                             take one, waiting for its job with a progress bar
    vela snapshot list notes [--json]                      newest first
    vela snapshot download notes NAME [--out PATH]         streamed, checked against the listing's sha256
    vela snapshot delete notes NAME
    vela snapshot restore notes NAME --into notes-0301     a new collection from it
    vela snapshot upload notes.tar --into notes [--sha256 HEX]   restore a download on this (or another) server

Unlike `vela reindex` or `vela ingest`, which run their job on a data directory in this process, these talk to a
server over HTTP, through the Python client (vela-client): the server keeps the snapshots, and a download and an
upload move one between servers. `--url` defaults to VELA_URL (else http://127.0.0.1:8000), `--api-key` to
VELA_API_KEY. Exit status: 0 done; 1 a job that failed, or no answer; 2 refused as given (no such collection or
snapshot, not a snapshot, a wrong key); 3 a conflict (the name to restore into is taken); 130 a cancelled job.
argparse only at import: the client is imported when a command runs. The options, the client, the exit statuses and
the waiting bar are those of every command that talks to a server (cli/remote.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.remote import Action, fail, human_size, job_exit_status, server_options, wait_with_bar, with_client

if TYPE_CHECKING:
    from vela_client import JobAccepted, VelaClient


def sha256_hex(text: str) -> str:
    """A sha256 as `sha256sum` prints it (and the listing shows it): 64 hex digits."""
    if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
        raise argparse.ArgumentTypeError(f"not a sha256 (64 hex digits): {text!r}")
    return text.lower()


def add_parser(sub: Any) -> None:
    """The `snapshot` subcommand and its own subcommands, on `vela`'s subparsers."""
    snapshot = sub.add_parser(
        "snapshot", help="a running server's snapshots (backups): create, list, download, delete, restore, upload"
    )
    cmds = snapshot.add_subparsers(dest="snapshot_command", required=True)
    server = server_options()
    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--no-wait", action="store_true", help="print the accepted job and return at once")

    def command(name: str, action: Action, help: str, *, waits: bool = False) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = cmds.add_parser(
            name, help=help, parents=[server, waiting] if waits else [server]
        )
        parser.set_defaults(func=with_client(action))
        return parser

    create = command("create", _create, "take a snapshot of a collection (a job)", waits=True)
    create.add_argument("collection", help="collection (or alias)")
    ls = command("list", _list, "a collection's snapshots, newest first: name, when, size, documents, passages")
    ls.add_argument("collection", help="collection (or alias); a deleted collection's snapshots are listed too")
    ls.add_argument("--json", action="store_true", help="the listing's entries as JSON (sha256 included)")
    download = command("download", _download, "download a snapshot (streamed, checked against its sha256)")
    download.add_argument("collection")
    download.add_argument("snapshot", help="its name, as `list` shows it")
    download.add_argument("--out", default=None, help="file or folder (default: the snapshot's name, here)")
    delete = command("delete", _delete, "delete a snapshot from the server")
    delete.add_argument("collection")
    delete.add_argument("snapshot")
    restore = command("restore", _restore, "make a new collection from a snapshot (a job)", waits=True)
    restore.add_argument("collection")
    restore.add_argument("snapshot")
    restore.add_argument("--into", required=True, help="the new collection's name (must be free)")
    upload = command("upload", _upload, "send a downloaded snapshot and restore it as a new collection", waits=True)
    upload.add_argument("path", type=Path, help="a snapshot tar (from `download`)")
    upload.add_argument("--into", required=True, help="the new collection's name (must be free)")
    upload.add_argument(
        "--sha256", type=sha256_hex, default=None, help="what the tar must hash to (the listing's; default its own)"
    )


def _follow(client: VelaClient, accepted: JobAccepted, args: argparse.Namespace, what: str) -> int:
    """Wait for a job with a progress bar (unless --no-wait), then print its final state as one JSON line."""
    print(f"job {accepted.job_id} ({what})", file=sys.stderr)
    if args.no_wait:
        print(json.dumps(accepted.model_dump()))
        return 0
    job = wait_with_bar(client, accepted.job_id, what)
    print(json.dumps({"job_id": job.id, "status": job.status, "error": job.error, "result": job.result}))
    return job_exit_status(job)


def _create(client: VelaClient, args: argparse.Namespace) -> int:
    return _follow(client, client.create_snapshot(args.collection), args, f"snapshot {args.collection}")


def _list(client: VelaClient, args: argparse.Namespace) -> int:
    snapshots = client.list_snapshots(args.collection)
    if args.json:
        print(json.dumps([s.model_dump() for s in snapshots], indent=2))
        return 0
    if not snapshots:
        print(f"no snapshots of {args.collection!r}", file=sys.stderr)
        return 0
    width = max(len(s.name) for s in snapshots)
    print(f"{'NAME':<{width}}  {'CREATED':<16}  {'SIZE':>10}  {'DOCUMENTS':>9}  {'PASSAGES':>9}")
    for s in snapshots:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created_at))
        print(f"{s.name:<{width}}  {created:<16}  {human_size(s.bytes):>10}  {s.documents:>9}  {s.passages:>9}")
    return 0


def _download(client: VelaClient, args: argparse.Namespace) -> int:
    path = client.download_snapshot(args.collection, args.snapshot, args.out or args.snapshot)
    print(path)
    return 0


def _delete(client: VelaClient, args: argparse.Namespace) -> int:
    client.delete_snapshot(args.collection, args.snapshot)
    print(f"deleted {args.snapshot}")
    return 0


def _restore(client: VelaClient, args: argparse.Namespace) -> int:
    accepted = client.restore_snapshot(args.collection, args.snapshot, into=args.into)
    return _follow(client, accepted, args, f"restore {args.snapshot} into {args.into}")


def _upload(client: VelaClient, args: argparse.Namespace) -> int:
    if not args.path.is_file():
        return fail(args, f"no file {args.path}", 2)
    accepted = client.upload_snapshot(args.path, into=args.into, sha256=args.sha256)
    return _follow(client, accepted, args, f"restore {args.path.name} into {args.into}")
