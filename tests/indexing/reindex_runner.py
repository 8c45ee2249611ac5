"""The process a kill test runs a reindex in: the job runner on a data directory, slowed to a few documents a
step so that a SIGKILL lands partway (--slow), or killed by itself at the one point a signal cannot be aimed at:
after a promotion's pointer is written, before the rollback target it replaced is deleted (--die-before-retire).

    python -m tests.indexing.reindex_runner DATA_DIR JOB_ID [--slow] [--die-before-retire]

Prints "ready" once its imports are done."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import indexing.gen_sync
import indexing.generations
from indexing.ingest import run_job
from indexing.jobs import JobStore
from indexing.store import CollectionStore
from models import EmbedderCache

DIED = 137  # the exit status of a process killed by SIGKILL


def main(data: Path, job_id: str, slow: bool, die_before_retire: bool = False) -> int:
    if slow:
        real = indexing.gen_sync.prepare_documents

        def slowly(*args: Any, **kwargs: Any) -> Any:
            time.sleep(0.05)
            return real(*args, **kwargs)

        indexing.gen_sync.PAGE = 4
        indexing.gen_sync.prepare_documents = slowly  # type: ignore[assignment]
    if die_before_retire:

        def die(*args: Any, **kwargs: Any) -> Any:
            os._exit(DIED)  # no clean-up, no job status: as a kill leaves it

        indexing.generations.drop_unnamed = die  # type: ignore[assignment]
    jobs = JobStore(data / "jobs.sqlite3")
    print("ready", flush=True)
    status = run_job(job_id=job_id, jobs=jobs, collections=CollectionStore(data), embedders=EmbedderCache())
    print(status.value, flush=True)
    return 0


if __name__ == "__main__":
    flags = sys.argv[3:]
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], "--slow" in flags, "--die-before-retire" in flags))
