"""What SQLite's FULL sync costs the job store, against NORMAL, in one run on one disk.

The doc stores and the job store commit with `PRAGMA synchronous=FULL` (velaio/files.py connect_sqlite): each
transaction is fsynced before it returns, so a write acknowledged as succeeded survives a power loss, not only a
process crash. Each round makes `--jobs` jobs in a fresh job store and takes each through its life as a write does
(create, start, one progress update, end: four transactions), once with NORMAL and once with FULL, alternately,
`--rounds` times. Reported: the median milliseconds per job of each, and their ratio (FULL / NORMAL). The data
directory's disk is what is measured: run it where VELA_DATA_DIR lives (`--dir`).

    python -m bench.sqlite_sync --out bench/results/sqlite-sync.json
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import indexing.jobs as jobs_module
from bench.common import command, machine, write_result
from indexing.jobs import JobKind, JobStatus, JobStore
from velaio.files import connect_sqlite

PAYLOAD = [{"id": "d1", "text": "a short document about tides " * 8}]


def _per_job_ms(directory: Path, sync: str, jobs: int) -> float:
    """Milliseconds per job's life in a fresh job store whose connections use `sync`."""

    def connect(path: Path, **kw: Any) -> sqlite3.Connection:
        conn = connect_sqlite(path, **kw)
        conn.execute(f"PRAGMA synchronous={sync}")
        return conn

    before = jobs_module.connect_sqlite
    jobs_module.connect_sqlite = connect  # the store's own connections, with the sync mode under test
    try:
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            store = JobStore(Path(tmp) / "jobs.sqlite3")
            t = time.perf_counter()
            for _ in range(jobs):
                job = store.create(collection="c", kind=JobKind.UPSERT, payload=PAYLOAD)
                store.start(job.id)
                store.progress(job.id, 1, 1)
                store.finish(job.id, JobStatus.SUCCEEDED)
            return (time.perf_counter() - t) / jobs * 1000
    finally:
        jobs_module.connect_sqlite = before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path("."), help="a folder on the disk to measure")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {"NORMAL": [], "FULL": []}
    for _ in range(args.rounds):
        for sync in times:
            times[sync].append(_per_job_ms(args.dir, sync, args.jobs))
    normal, full = (statistics.median(times[s]) for s in ("NORMAL", "FULL"))
    result = {
        "command": command(),
        "machine": machine(),
        "jobs_per_round": args.jobs,
        "transactions_per_job": 4,
        "ms_per_job": {"NORMAL": round(normal, 3), "FULL": round(full, 3)},
        "ms_per_job_each_round": {s: [round(x, 3) for x in v] for s, v in times.items()},
        "added_ms_per_transaction": round((full - normal) / 4, 3),
        "ratio_full_over_normal": round(full / normal, 2),
    }
    if args.out is not None:
        write_result(args.out, result)  # prints it too
    else:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
