"""Room for new work: a job is refused, before anything of it is stored, when the disk of the data directory is
nearly full or too many jobs wait to run.

- Free disk below VELA_MIN_FREE_DISK_MB (or below VELA_MIN_FREE_DISK_PERCENT of the disk): 507
  `insufficient_storage`. Writes, deletes, patches, snapshots (made or uploaded), restores, reindexes and retries
  all make or queue a job that writes to the disk; searches and reads go on. 507, not 503: waiting does not help
  (nothing frees the disk but an operator), so clients must not retry it as they retry a 503.
- VELA_MAX_QUEUED_JOBS jobs queued or running: 503 `queue_full` with Retry-After. The queue drains by itself, so
  the client sends the request again later (the Python client does so after Retry-After).

Every job is made through the job store, which calls `admit` first (JobStore.admit); a route that writes to the
disk before it makes its job (an upload, a write that makes its collection) calls `check_room` itself first.
`PUT /collections/{name}` makes an empty collection and no job: it checks the disk alone (`check_disk`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from indexing.jobs import JobStore
from service.settings import Settings

QUEUE_FULL_RETRY_AFTER_S = 5
MB = 1024 * 1024


class DiskFull(Exception):
    """No room on the data directory's disk for new work (the API answers 507 insufficient_storage)."""


class QueueFull(Exception):
    """Too many jobs queued or running (the API answers 503 queue_full, with Retry-After)."""

    retry_after_s = QUEUE_FULL_RETRY_AFTER_S


def free_disk(path: Path) -> tuple[int, int]:
    """Bytes free to this process on `path`'s file system (or its nearest existing parent's), and the disk's size."""
    while not path.exists() and path.parent != path:
        path = path.parent
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def disk_problem(settings: Settings, path: Path) -> str | None:
    """Why a write on `path`'s disk is refused, or None."""
    free, total = free_disk(path)
    floor = settings.min_free_disk_mb * MB
    if settings.min_free_disk_percent > 0:
        floor = max(floor, int(total * settings.min_free_disk_percent / 100))
    if free >= floor:
        return None
    return (
        f"the disk of the data directory has {free // MB} MB free, below the {floor // MB} MB kept free "
        "(VELA_MIN_FREE_DISK_MB, VELA_MIN_FREE_DISK_PERCENT): writes, snapshots and restores are refused until "
        "space is freed (delete snapshots or collections); searches go on"
    )


def check_disk(settings: Settings, paths: Iterable[Path] = ()) -> None:
    """DiskFull when the data directory's disk (or that of one of `paths`, a snapshots folder elsewhere) is nearly
    full."""
    for path in dict.fromkeys([settings.data_dir, *paths]):
        problem = disk_problem(settings, Path(path).expanduser())
        if problem is not None:
            raise DiskFull(problem)


def check_queue(settings: Settings, jobs: JobStore) -> None:
    """QueueFull when VELA_MAX_QUEUED_JOBS jobs are queued or running."""
    waiting = jobs.unfinished_count()
    if waiting >= settings.max_queued_jobs:
        raise QueueFull(
            f"{waiting} jobs are queued or running; the limit is {settings.max_queued_jobs} (VELA_MAX_QUEUED_JOBS): "
            "send the request again once some have ended"
        )


def check_room(settings: Settings, jobs: JobStore, paths: Iterable[Path] = ()) -> None:
    """Both checks: the disk first (it needs an operator; a full queue only time)."""
    check_disk(settings, paths)
    check_queue(settings, jobs)


def admission(settings: Settings, jobs: JobStore) -> None:
    """Make the job store refuse a new job (or a retry) while there is no room for it."""
    jobs.admit = lambda: check_room(settings, jobs)
