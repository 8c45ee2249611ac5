"""`vela worker`: an indexing process that takes jobs from Redis and writes collections on disk."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable

import torch
from pydantic import ValidationError

from indexing import gpu_index
from indexing.ingest import run_job
from indexing.jobs import JobStore
from indexing.logs import configure_logging
from indexing.queue import QueueUnavailable
from indexing.redis_queue import RedisJobQueue
from indexing.redis_worker import RedisWorker
from indexing.reindex import clean_all
from indexing.settings import IndexingSettings, settings_error
from indexing.snapshot_restore import clean_restore_leftovers
from indexing.store import CollectionStore
from models import EmbedderCache
from models.device import DeviceError, resolve_device, resolve_precision
from velaio.open_files import raise_open_files_limit

log = logging.getLogger("vela.worker")


def main(*, name: str | None = None) -> int:
    try:
        settings = IndexingSettings()
    except ValidationError as exc:  # one line naming the variable, as `vela serve` says it
        print(f"vela worker: {settings_error(exc)}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    raise_open_files_limit()  # every collection it writes keeps its files open (indexing/shard_budget.py)
    if not settings.redis_url:
        log.error("vela worker needs VELA_REDIS_URL (the embedded default runs jobs inside `vela serve`)")
        return 2
    try:  # VELA_DEVICE=cuda on a host without CUDA stops here, before any job is taken
        device = resolve_device(settings.device)
        precision = resolve_precision(settings.precision, device)
    except DeviceError as e:
        log.error(str(e))
        return 2
    gpu_index.configure(device, settings.gpu_min_passages)
    name = name or f"{socket.gethostname()}-{os.getpid()}"
    # Ingest is background work: queries served on the same host keep the CPU first.
    os.nice(settings.worker_nice)
    if settings.worker_threads:
        torch.set_num_threads(settings.worker_threads)
    data_dir = settings.data_dir.expanduser().resolve()
    collections = CollectionStore(data_dir)
    # The jobs this worker starts are leased for the claim time and renewed by its heartbeat: a job whose lease
    # expired has lost its worker, and is queued again even if Redis lost its entry (indexing/job_leases.py).
    jobs = JobStore(data_dir / "jobs.sqlite3", retention_s=settings.jobs_retention_s(), lease_s=settings.claim_idle_s)
    embedders = EmbedderCache(device=device, precision=precision)
    try:
        embedders.get(settings.embedder)
    except (OSError, ValueError) as exc:  # before any job is taken: every job would fail
        print(f"vela worker: VELA_EMBEDDER: {exc}", file=sys.stderr)
        return 2
    for coll_name in collections.names():
        outcome = collections.get(coll_name).check_consistency()
        log.info("collection checked", extra={"collection": coll_name, "outcome": outcome})
    clean_all(collections, jobs)  # generations of reindexes that are over; a running one resumes
    clean_restore_leftovers(collections, jobs)  # the hidden folders of restores a crash cut short

    producer = RedisJobQueue(settings.redis_url, stream=settings.queue_stream, jobs=jobs)

    def submit_refresh(job_id: str) -> None:
        # A CDE context refresh: a reindex job, taken by whichever worker is free. Redis gone meanwhile fails the
        # refresh (the next write that finds the corpus drifted queues another), not the job that just ended.
        try:
            producer.submit(job_id)
        except QueueUnavailable:
            log.warning("context refresh not queued: job queue unreachable", extra={"job_id": job_id})

    def run(job_id: str, heartbeat: Callable[[], None]) -> object:
        return run_job(
            job_id=job_id,
            jobs=jobs,
            collections=collections,
            embedders=embedders,
            batch_size=settings.ingest_batch_size,
            commit_interval_s=settings.commit_interval_s,
            context_refresh_fraction=settings.context_refresh_fraction,
            ray=settings.ray_ingest(),
            on_progress=lambda _done, _total: heartbeat(),
            worker=name,
            submit=submit_refresh,
            metadata_limits=settings.metadata_limits(),  # a patch checks what it would store
        )

    stop = threading.Event()
    # SIGTERM/SIGINT finish the current job, then exit; SIGKILL loses nothing either (the entry stays pending).
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    worker = RedisWorker(
        settings.redis_url,
        run,
        name=name,
        stream=settings.queue_stream,
        claim_idle_s=settings.claim_idle_s,
        alive_file=settings.heartbeat_file,
        jobs=jobs,  # queued jobs whose entries Redis lost are added again
    )
    worker.serve(stop)
    return 0
