"""The process a kill test runs a reindex in: the job runner on a data directory, slowed to a few documents a
step so that a SIGKILL lands partway.

    python -m tests.indexing.reindex_runner DATA_DIR JOB_ID [--slow]

Prints "ready" once its imports are done."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import indexing.gen_sync
from indexing.ingest import run_job
from indexing.jobs import JobStore
from indexing.store import CollectionStore
from models import EmbedderCache


def main(data: Path, job_id: str, slow: bool) -> int:
    if slow:
        real = indexing.gen_sync.prepare_documents

        def slowly(*args: Any, **kwargs: Any) -> Any:
            time.sleep(0.05)
            return real(*args, **kwargs)

        indexing.gen_sync.PAGE = 4
        indexing.gen_sync.prepare_documents = slowly  # type: ignore[assignment]
    jobs = JobStore(data / "jobs.sqlite3")
    print("ready", flush=True)
    status = run_job(job_id=job_id, jobs=jobs, collections=CollectionStore(data), embedders=EmbedderCache())
    print(status.value, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], "--slow" in sys.argv[3:]))
