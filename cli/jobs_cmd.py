"""`vela jobs list|show|cancel|retry|wait`: a running server's background jobs from the shell.

    vela jobs list [--collection C] [--status S ...] [--kind K ...] [--limit N] [--json]   newest first
    vela jobs show ID [--json]          status, progress, speed, times, error and result
    vela jobs cancel ID                 a queued job at once, a running one at its next batch
    vela jobs retry ID                  queue a failed job again
    vela jobs wait ID [--json]          a progress bar until it ends; the exit status says how it ended

Through the Python client, with --url and --api-key and the exit statuses of every command that talks to a server
(cli/remote.py): 2 for an unknown job, 3 for cancelling a job that has ended or retrying one that did not fail;
`wait` exits 0 when the job succeeded, 1 when it failed, 130 when it was cancelled.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from cli.arg_types import int_within
from cli.remote import (
    Action,
    fail,
    job_exit_status,
    local_time,
    print_fields,
    print_json,
    print_table,
    server_options,
    wait_with_bar,
    with_client,
)

if TYPE_CHECKING:
    from vela_client import Job, VelaClient

STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
MAX_PAGE = 1000  # the most jobs the server lists in one page


def add_parser(sub: Any) -> None:
    """The `jobs` subcommand and its own subcommands, on `vela`'s subparsers."""
    jobs = sub.add_parser("jobs", help="a running server's background jobs: list, show, cancel, retry, wait")
    cmds = jobs.add_subparsers(dest="jobs_command", required=True)
    server = server_options()

    def command(name: str, action: Action, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = cmds.add_parser(name, help=help, parents=[server])
        parser.set_defaults(func=with_client(action))
        return parser

    ls = command("list", _list, "jobs newest first: id, collection, kind, status, progress, when created")
    ls.add_argument("--collection", default=None, help="only this collection's jobs (an alias means its collection)")
    ls.add_argument(
        "--status",
        nargs="+",
        action="extend",
        choices=STATUSES,
        default=None,
        metavar="S",
        help=f"only jobs in these statuses ({', '.join(STATUSES)}; several may be given)",
    )
    ls.add_argument(
        "--kind",
        nargs="+",
        action="extend",
        default=None,
        metavar="K",
        help="only jobs of these kinds (upsert, delete, delete_by_filter, patch, schema, reindex, promote, rollback, "
        "snapshot, restore; several may be given)",
    )
    ls.add_argument(
        "--limit",
        type=int_within(1, MAX_PAGE),
        default=None,
        metavar="N",
        help=f"at most N jobs (default 50, at most {MAX_PAGE})",
    )
    ls.add_argument("--json", action="store_true", help="the jobs as the API returns them, a JSON list")
    show = command("show", _show, "one job: status, progress, speed, times, error and result")
    show.add_argument("job", metavar="ID")
    show.add_argument("--json", action="store_true", help="the job as the API returns it")
    cancel = command("cancel", _cancel, "cancel a job: a queued one at once, a running one at its next batch")
    cancel.add_argument("job", metavar="ID")
    retry = command("retry", _retry, "queue a failed job again (the same documents)")
    retry.add_argument("job", metavar="ID")
    wait = command(
        "wait", _wait, "wait for a job to end, with a progress bar; exit 0 succeeded, 1 failed, 130 cancelled"
    )
    wait.add_argument("job", metavar="ID")
    wait.add_argument("--json", action="store_true", help="print the final job as the API returns it")


def _progress(job: Job) -> str:
    if job.total <= 0:
        return "-"  # a job that counts nothing (a promotion, a rollback), or not yet
    return f"{job.done}/{job.total}"


def _list(client: VelaClient, args: argparse.Namespace) -> int:
    page = client.list_jobs(collection=args.collection, status=args.status, kind=args.kind, limit=args.limit)
    if args.json:
        print_json([job.model_dump(mode="json") for job in page.jobs])
    elif not page.jobs:
        print("no jobs", file=sys.stderr)
    else:
        header = ("ID", "COLLECTION", "KIND", "STATUS", "PROGRESS", "CREATED")
        rows = [(j.id, j.collection, j.kind, j.status, _progress(j), local_time(j.created_at)) for j in page.jobs]
        print_table(header, rows, right=frozenset({4}))
    if page.next_cursor is not None:
        print(f"(more jobs than these {len(page.jobs)}: --limit N shows up to {MAX_PAGE})", file=sys.stderr)
    return 0


def _duration(job: Job) -> str:
    if job.started_at is None or job.finished_at is None:
        return ""
    return f" (ran {job.finished_at - job.started_at:.1f} s)"


def job_fields(job: Job) -> list[tuple[str, str]]:
    """What `vela jobs show` prints of a job: the fields that are set, in a reading order."""
    percent = f" ({100 * job.done // job.total}%)" if job.total > 0 else ""
    fields = [
        ("id", job.id),
        ("collection", job.collection),
        ("kind", job.kind),
        ("status", job.status + (" (cancel requested)" if job.cancel_requested and not job.finished else "")),
        ("progress", f"{_progress(job)}{percent}"),
    ]
    if job.docs_per_s is not None:
        fields.append(("speed", f"{job.docs_per_s:.1f} docs/s"))
    if job.eta_s is not None and not job.finished:
        fields.append(("eta", f"{job.eta_s:.0f} s"))
    fields += [("attempts", str(job.attempts)), ("created", local_time(job.created_at))]
    if job.worker:
        fields.append(("worker", job.worker))
    if job.started_at is not None:
        fields.append(("started", local_time(job.started_at)))
    if job.finished_at is not None:
        fields.append(("finished", local_time(job.finished_at) + _duration(job)))
    if job.error:
        fields.append(("error", job.error))
    if job.result:
        fields.append(("result", json.dumps(job.result)))
    return fields


def _show(client: VelaClient, args: argparse.Namespace) -> int:
    job = client.get_job(args.job)
    if args.json:
        print_json(job.model_dump(mode="json"))
    else:
        print_fields(job_fields(job))
    return 0


def _cancel(client: VelaClient, args: argparse.Namespace) -> int:
    job = client.cancel_job(args.job)
    if job.status == "cancelled":
        print(f"cancelled job {job.id} ({job.kind} {job.collection})")
    else:  # running: it stops at its next batch; what it did so far stays
        print(
            f"cancel requested for job {job.id} ({job.kind} {job.collection}, {job.status}): it stops at its next batch"
        )
    return 0


def _retry(client: VelaClient, args: argparse.Namespace) -> int:
    job = client.retry_job(args.job)
    print(f"job {job.id} ({job.kind} {job.collection}) {job.status} again: vela jobs wait {job.id} follows it")
    return 0


def _wait(client: VelaClient, args: argparse.Namespace) -> int:
    job = client.get_job(args.job)  # an unknown id is refused here, before any bar
    if not job.finished:
        job = wait_with_bar(client, job.id, f"{job.kind} {job.collection}")
    if args.json:
        print_json(job.model_dump(mode="json"))
    elif job.status == "succeeded":
        count = f": {job.done} documents" if job.total > 0 else ""
        print(f"job {job.id} ({job.kind} {job.collection}) succeeded{count}{_duration(job)}")
    else:
        fail(
            args,
            f"job {job.id} ({job.kind} {job.collection}) {job.status}" + (f": {job.error}" if job.error else ""),
            1,
        )
    return job_exit_status(job)
