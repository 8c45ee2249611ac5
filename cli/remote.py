"""What the commands that talk to a running server share: `vela snapshot`, `vela jobs`, `vela alias`,
`vela collections` and `vela search`.

Each goes through the Python client (vela-client), never its own HTTP: `--url` defaults to VELA_URL (else
http://127.0.0.1:8000), `--api-key` to VELA_API_KEY. A client error is one line on stderr, `vela GROUP: ...`, and an
exit status that says which kind (EXIT_*): 0 done; 1 a job that failed, or no answer; 2 refused as given (no such
collection, job, alias or snapshot, a bad request, a wrong key or a read-only one for a write); 3 a conflict (a job
that has already ended, a name that is taken); 130 a cancelled job, or waiting stopped by Ctrl-C.

argparse and the standard library only at import: the client (and tqdm) are imported when a command runs, so that
`vela --help` stays instant.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vela_client import Job, VelaClient

Action = Callable[["VelaClient", argparse.Namespace], int]

EXIT_OK = 0
EXIT_FAILED = 1  # a job that failed, no answer from the server, a fault on it
EXIT_REFUSED = 2  # refused as given: not found, a bad request, a wrong key
EXIT_CONFLICT = 3
EXIT_CANCELLED = 130


def server_options() -> argparse.ArgumentParser:
    """The parent parser of every subcommand that talks to a server: --url and --api-key."""
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", default=None, help="the server (default VELA_URL, else http://127.0.0.1:8000)")
    server.add_argument(
        "--api-key", default=None, help="default VELA_API_KEY, which is safer: a command line is visible to other users"
    )
    return server


# Characters a terminal acts on rather than shows: C0 and C1 controls (escape sequences that retitle the window or
# clear the screen), DEL, and the bidirectional overrides that reorder what follows them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with what a terminal would act on written as escapes (`\x1b`): ids, titles and texts come from
    whoever indexed them, and reach an operator's terminal."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def fail(args: argparse.Namespace, message: str, status: int) -> int:
    """`message` as one line on stderr, named by the command group (`vela jobs: ...`); returns `status`."""
    print(f"vela {getattr(args, 'command', None) or 'remote'}: {printable(message)}", file=sys.stderr)
    return status


class StoppedWaiting(Exception):
    """Ctrl-C while a command waited for a job: the job goes on, on the server."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id


def with_client(action: Action) -> Callable[[argparse.Namespace], int]:
    """`action` with a client of the server; the client's errors as one line and an exit status."""

    def run(args: argparse.Namespace) -> int:
        try:
            from vela_client import (
                Conflict,
                ConnectionFailed,
                Forbidden,
                InvalidRequest,
                NotFound,
                PayloadTooLarge,
                Unauthorized,
                VelaClient,
                VelaError,
            )
        except ImportError:
            return fail(args, "needs the Python client, vela-client: pip install ./client (from the repository)", 1)
        try:
            client = VelaClient(args.url, api_key=args.api_key)
        except ValueError as exc:  # an address that is no http(s) URL, a key no header can carry: refused as given
            return fail(args, str(exc).replace("base_url", "--url", 1).replace("api_key", "--api-key", 1), EXIT_REFUSED)
        try:
            with client:
                return action(client, args)
        except StoppedWaiting as stopped:
            job_id = stopped.job_id
            return fail(args, f"stopped waiting; job {job_id} goes on (GET /jobs/{job_id})", EXIT_CANCELLED)
        except Conflict as exc:
            return fail(args, str(exc), EXIT_CONFLICT)
        except (NotFound, InvalidRequest, Unauthorized, Forbidden, PayloadTooLarge) as exc:
            return fail(args, str(exc), EXIT_REFUSED)  # a wrong key, or a read-only one for a write, is one
        except ConnectionFailed as exc:
            return fail(args, f"no Vela server answers at {client.base_url} ({exc})", EXIT_FAILED)
        except VelaError as exc:  # a server fault, no answer, a damaged download
            return fail(args, str(exc), EXIT_FAILED)
        except ValueError as exc:  # an argument the client refuses before sending (an empty job id): as given
            return fail(args, str(exc), EXIT_REFUSED)

    return run


def wait_with_bar(client: VelaClient, job_id: str, what: str) -> Job:
    """Wait for a job to end, with a progress bar of its documents on stderr (none for a job done within a second),
    and return its final state, whatever it is. Ctrl-C raises StoppedWaiting: the job itself goes on."""
    from tqdm import tqdm

    with tqdm(desc=what, unit="doc", delay=1.0) as bar:

        def advance(job: Job) -> None:
            bar.total = job.total
            bar.update(job.done - bar.n)

        try:
            return client.wait_job(job_id, on_progress=advance, check=False)
        except KeyboardInterrupt:
            raise StoppedWaiting(job_id) from None


def job_exit_status(job: Job) -> int:
    """A finished job's exit status: 0 succeeded, 130 cancelled, 1 failed."""
    return {"succeeded": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(job.status, EXIT_FAILED)


def print_json(value: object) -> None:
    print(json.dumps(value, indent=2))


def local_time(stamp: float | None, *, seconds: bool = True) -> str:
    """A Unix time as local `YYYY-MM-DD HH:MM[:SS]`; "-" for none."""
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M", time.localtime(stamp))


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, right: frozenset[int] = frozenset()) -> None:
    """Columns two spaces apart, each as wide as its widest cell; the columns in `right` (numbers) right-aligned.
    The last column is not padded, so no line ends in spaces."""
    rows = [[printable(str(cell)) for cell in row] for row in rows]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        cells = [
            str(cell).rjust(width) if i in right else str(cell).ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())


def print_fields(fields: Sequence[tuple[str, str]]) -> None:
    """One `name  value` line per field, the values aligned."""
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        print(f"{name:<{width}}  {printable(str(value))}")


def human_size(count: int) -> str:
    """A byte count as `812 B`, `3.0 KiB`, `1.4 MiB` or `2.1 GiB`."""
    size, unit = float(count), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"


def shorten(text: str, width: int) -> str:
    """`text` on one line (runs of whitespace as one space), cut to `width` characters with "..." where longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3].rstrip() + "..."
