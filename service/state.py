"""What the API process holds while it runs; built in the app's lifespan, never at import."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from indexing import gpu_index
from indexing.collection import Collection
from indexing.ingest import run_job
from indexing.job_runner import SharedLaneQueue
from indexing.jobs import JobStore, JobStoreMoved
from indexing.lanes import LaneQueue
from indexing.queue import JobQueue
from indexing.redis_queue import RedisJobQueue
from indexing.reindex import clean_all
from indexing.shard_budget import FDS_PER_SHARD, FDS_RESERVED, shard_cap
from indexing.snapshot_restore import clean_restore_leftovers
from indexing.store import CollectionStore
from models import EmbedderCache
from models.device import resolve_device, resolve_precision
from models.reranker import RerankerCache
from service.batching import QueryEncoders
from service.capacity import admission
from service.metrics import Metrics
from service.settings import Settings
from velaio.open_files import open_files_limit, raise_open_files_limit

log = logging.getLogger("vela.service")


@dataclass
class AppState:
    settings: Settings
    collections: CollectionStore
    jobs: JobStore
    queue: JobQueue
    embedders: EmbedderCache
    query_encoders: QueryEncoders
    metrics: Metrics
    rerankers: RerankerCache = field(default_factory=RerankerCache)  # each loaded on first use (or in start)
    ready: bool = False


def build_state(settings: Settings, *, lease_s: float | None = None) -> AppState:
    """`lease_s`: the jobs this process starts are leased (indexing/job_leases.py), as a `vela worker`'s are; a CLI
    that runs its own jobs beside workers renews them while it runs (cli/ingest_run.py)."""
    # VELA_DEVICE / VELA_PRECISION resolved once, first: `cuda` without CUDA stops the start-up (DeviceError).
    device = resolve_device(settings.device)
    precision = resolve_precision(settings.precision, device)
    gpu_index.configure(device, settings.gpu_min_passages)
    data_dir = settings.data_dir.expanduser().resolve()
    collections = CollectionStore(data_dir)
    # Every shard keeps its files open: the soft open-files limit goes up to the hard one, and new collections
    # stop at the shards that limit holds (or VELA_MAX_SHARDS, if lower).
    open_files = raise_open_files_limit()
    collections.shard_cap = shard_cap(settings.max_shards, "VELA_MAX_SHARDS", open_files, settings.max_connections)
    jobs = JobStore(data_dir / "jobs.sqlite3", retention_s=settings.jobs_retention_s(), lease_s=lease_s)
    admission(settings, jobs)  # no job is queued while the disk is nearly full or the queue is (service/capacity.py)
    embedders = EmbedderCache(device=device, precision=precision, encoder=settings.encoder)

    def run(job_id: str) -> object:
        return run_job(
            job_id=job_id,
            jobs=jobs,
            collections=collections,
            embedders=embedders,
            batch_size=settings.ingest_batch_size,
            commit_interval_s=settings.commit_interval_s,
            context_refresh_fraction=settings.context_refresh_fraction,
            ray=settings.ray_ingest(),
            submit=lambda refresh_id: queue.submit(refresh_id),  # a CDE context refresh goes to the same queue
            metadata_limits=settings.metadata_limits(),  # a patch checks what it would store
        )

    queue: JobQueue
    if settings.redis_url:
        # Production: jobs go through Redis to `vela worker` processes; this process only serves.
        queue = RedisJobQueue(settings.redis_url, stream=settings.queue_stream, jobs=jobs)
    else:
        # Jobs run in whichever process holds the job runner's lock: one of this `vela serve`'s processes, or of
        # another serving the same data directory (a second host, a replica), never two at once. The lanes keep
        # writes running beside a reindex (indexing/lanes.py).
        queue = SharedLaneQueue(jobs, run, data_dir / "jobs.lock", on_lead=lambda: maintain(collections, jobs))
    metrics = Metrics(collections, jobs, multiprocess=settings.serving_processes > 1)
    encoders = QueryEncoders(
        embedders,
        max_batch=settings.query_batch_max,
        max_wait_ms=settings.query_batch_wait_ms,
        on_batch=metrics.encoder_batch.observe,
    )
    rerankers = RerankerCache(device=device, precision=precision)

    # A promoted generation's query encoder is loaded and run once before searches switch to it.
    def warm(coll: Collection) -> None:
        encoders.get(coll.settings.embedder).encode_queries(["warm up"])

    collections.on_generation = warm
    return AppState(settings, collections, jobs, queue, embedders, encoders, metrics, rerankers)


def start(state: AppState) -> None:
    """Load the default embedder, check every collection against its doc store, load every collection's
    published segments and start the background reader, start the queue. /readyz answers 503 until this
    is done, so no user query pays a cold start."""
    log.info("loading embedder", extra={"embedder": state.settings.embedder})
    state.query_encoders.get(state.settings.embedder).encode_queries(["warm up"])
    if state.settings.reranker:  # the default reranker: loaded and run once now, not on a user's query
        log.info("loading reranker", extra={"reranker": state.settings.reranker})
        state.rerankers.get(state.settings.reranker).score("warm up", ["warm up"])
    check_open_files(state)
    if state.settings.ray_address:
        # Shards are searched by Ray actors; connecting now makes /readyz wait for the cluster, not the first search.
        state.collections.use_ray(state.settings.ray_address, cpus_per_shard=state.settings.ray_shard_cpus)
    if isinstance(state.queue, SharedLaneQueue):
        state.queue.try_lead()  # the process that runs jobs does the maintenance below; the others only serve
    else:
        maintain(state.collections, state.jobs)
    state.collections.start_reader()  # loads every published index now, then follows new manifests
    state.queue.start()
    if isinstance(state.queue, RedisJobQueue):
        # A job recorded as queued that the stream does not hold (the API died before its XADD, or Redis lost the
        # entry) is handed over again, as the workers do from time to time (indexing/redis_queue.py, requeue_lost).
        # Redis failing here stops the start-up (the process is started again) and leaves these jobs queued.
        state.queue.hand_over()
    state.ready = True


def check_open_files(state: AppState) -> None:
    """Say so at start-up when the shards already stored need more open files than this process may hold: each
    is opened now and stays open, so requests would fail with "Too many open files". Nothing stored is refused;
    new collections are (the shard cap)."""
    held = state.collections.shards_held()
    open_files = open_files_limit()
    needed = held * FDS_PER_SHARD + state.settings.max_connections + FDS_RESERVED
    if open_files is not None and needed > open_files:
        log.error(
            "open files limit too low for the shards stored: raise the hard limit (LimitNOFILE= of the systemd "
            "unit, --ulimit nofile= of docker run, or ulimit -Hn), or delete collections",
            extra={"shards": held, "open_files_needed": needed, "open_files_limit": open_files},
        )
    cap = state.collections.shard_cap
    if cap is not None and held > cap.limit:
        log.warning("shards stored past the cap: new collections are refused", extra={"shards": held, "cap": cap.limit})


def queue_status(state: AppState) -> str:
    """`ok`, or `unreachable` while the job queue (Redis) does not answer: writes are then refused with 503
    `queue_unavailable`, searches go on. A PING with a short timeout; the in-process queues are always `ok`."""
    if isinstance(state.queue, RedisJobQueue) and not state.queue.reachable():
        return "unreachable"
    try:
        state.jobs.check_file()
    except JobStoreMoved:
        return "job_store_moved"
    return "ok"


def maintain(collections: CollectionStore, jobs: JobStore) -> None:
    """What the process that runs jobs does before it runs any: every collection checked against its doc store
    (a write a crash cut short is finished or undone), and the generations of reindexes that are over removed
    (a running one resumes); folders that hold no collection (what a merge racing a delete left) go."""
    for name in collections.remove_leftovers():
        log.info("removed a folder that held no collection", extra={"folder": name})
    for name in collections.names():
        try:
            outcome = collections.get(name).check_consistency()
        except Exception:  # one broken collection must not keep every other one's jobs from running
            log.exception("collection check failed", extra={"collection": name})
            continue
        log.info("collection checked", extra={"collection": name, "outcome": outcome})
    clean_all(collections, jobs)
    clean_restore_leftovers(collections, jobs)  # the hidden folders of restores a crash cut short


def begin_stop(state: AppState) -> None:
    """The process was told to stop (SIGTERM or SIGINT, service/server.py StopSignalServer): from now on
    `/readyz` answers 503 (a load balancer sends no new requests here while open ones drain), the process starts
    no job, and with several processes takes no job lock, while uvicorn still drains its open connections; the
    job that runs now goes on, and `stop` (the lifespan's end) waits for it. Jobs still queued stay queued for
    the restart. Runs in the signal handler: only a flag and events are set (InProcessQueue.stop_starting). The
    Redis queue's API process runs no job."""
    state.ready = False
    if isinstance(state.queue, (LaneQueue, SharedLaneQueue)):
        state.queue.stop_starting()


def stop(state: AppState) -> None:
    state.ready = False
    state.queue.stop()
    state.collections.stop_reader()
    state.query_encoders.stop()
