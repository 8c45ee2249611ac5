"""Prometheus metrics: request counts and latencies per route and search mode, the rerank stage, and (read at scrape
time, service/metric_collectors.py) index sizes and the job store's counts."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from fastapi.routing import iter_route_contexts
from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry, Counter, Histogram
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from indexing.jobs import JobStore
from indexing.store import CollectionStore
from service import timing
from service.metric_collectors import IndexSizeCollector, JobCollector

LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
NO_DIM = "none"  # the `dim` label of a bm25 search: it reads no dense index


class Metrics:
    def __init__(self, collections: CollectionStore, jobs: JobStore, *, multiprocess: bool = False) -> None:
        # With several API processes (`vela serve --processes`), each writes its values to files in
        # PROMETHEUS_MULTIPROC_DIR (set by `vela serve` before any process imports prometheus_client) and a
        # scrape, answered by any one process, sums them all; the metrics' own registry then only names them.
        own = CollectorRegistry()
        if multiprocess:
            from prometheus_client import multiprocess as mp
            from prometheus_client import values

            # The value class is picked when prometheus_client is imported; `vela serve` imports it before it
            # forks, so each process picks again now that PROMETHEUS_MULTIPROC_DIR is set.
            values.ValueClass = values.get_value_class()
            self.registry = CollectorRegistry()
            mp.MultiProcessCollector(self.registry)
        else:
            self.registry = own
            # process_* (CPU, memory, file descriptors), python_gc_* and python_info of this process: with one
            # process they describe the server. With several they are left out: a scrape is answered by whichever
            # process the kernel hands the connection, so they would describe a different process at each scrape,
            # and adding them up is wrong too (a start time, a file-descriptor limit; a dead process's CPU seconds
            # would drop out of a counter). prometheus_client's multiprocess mode has no process metrics either.
            for collector in (PROCESS_COLLECTOR, GC_COLLECTOR, PLATFORM_COLLECTOR):
                own.register(collector)
        self.requests = Counter(
            "vela_http_requests_total", "HTTP requests", ["route", "method", "status"], registry=own
        )
        self.latency = Histogram(
            "vela_http_request_duration_seconds",
            "HTTP request latency",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=own,
        )
        # One observation per search request (a batch of queries is one); its _count is the search requests.
        self.search_latency = Histogram(
            "vela_search_duration_seconds",
            "time of a search request's search work (a /search/batch once for all its queries), per mode and dim",
            ["mode", "dim"],
            buckets=LATENCY_BUCKETS,
            registry=own,
        )
        self.search_queries = Counter(
            "vela_search_queries_total",
            "queries searched (each query of a /search/batch counts), per mode and dim",
            ["mode", "dim"],
            registry=own,
        )
        self.encoder_batch = Histogram(
            "vela_query_encoder_batch_texts",
            "queries per micro-batched encoder pass",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=own,
        )
        self.stages = Histogram(
            "vela_request_stage_seconds",
            "time per Server-Timing stage of a request (queue, encode, engine, hydrate, rerank, serialize)",
            ["route", "stage"],
            buckets=LATENCY_BUCKETS,
            registry=own,
        )
        self.rerank_queries = Counter(
            "vela_rerank_queries_total",
            "queries through the rerank stage, by outcome (ok, timeout, error: the fused order was returned)",
            ["status"],
            registry=own,
        )
        # By outcome too: a timeout scores only part of the pairs and takes its whole budget, which would otherwise
        # hide in the pairs per query and the latency of the queries that were reranked in full.
        self.rerank_pairs = Counter(
            "vela_rerank_pairs_total", "(query, passage) pairs scored, by outcome", ["status"], registry=own
        )
        self.rerank_latency = Histogram(
            "vela_rerank_duration_seconds",
            "rerank stage time per query, by outcome",
            ["status"],
            buckets=LATENCY_BUCKETS,
            registry=own,
        )
        # Read at scrape time by the process that answers, once (not summed over the processes' files).
        self.registry.register(IndexSizeCollector(collections))
        self.registry.register(JobCollector(jobs))

    def observe_search(self, *, mode: str, dim: str, queries: int, seconds: float) -> None:
        """One search request: `queries` queries in `seconds` of search work."""
        dim = NO_DIM if mode == "bm25" else dim
        self.search_latency.labels(mode, dim).observe(seconds)
        self.search_queries.labels(mode, dim).inc(queries)

    def observe_rerank(self, *, status: str, pairs: int, seconds: float) -> None:
        self.rerank_queries.labels(status).inc()
        self.rerank_pairs.labels(status).inc(pairs)
        self.rerank_latency.labels(status).observe(seconds)

    def asgi(self, app: ASGIApp, routes: Callable[[], Sequence[BaseRoute]] = list) -> ASGIApp:
        """Pure ASGI middleware (no BaseHTTPMiddleware task and stream per request): counts and times
        every HTTP request by its route template. `routes` gives the application's routes, for requests the
        router never saw: those answered before routing (a 401 from the key check, a 413 from the body limit)
        are counted under the template their path matches, not lumped with paths that match none."""
        templates: list[tuple[re.Pattern[str], str]] = []

        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            start = time.perf_counter()
            status = 500

            async def send_status(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            try:
                await app(scope, receive, send_status)
            finally:
                # The route template, not the raw path, keeps label cardinality bounded (the router has
                # put the matched route into the scope by now).
                path = getattr(scope.get("route"), "path", None) or template_of(scope["path"])
                self.requests.labels(path, scope["method"], str(status)).inc()
                self.latency.labels(path, scope["method"]).observe(time.perf_counter() - start)
                timings = scope.get(timing.SCOPE_KEY)
                if timings is not None:
                    for stage, ms in timings.stages.items():
                        if stage != "total":  # the request latency histogram above has it
                            self.stages.labels(path, stage).observe(ms / 1000.0)

        def template_of(path: str) -> str:
            if not templates:  # the routes are all included once the first request arrives
                templates.extend((c.path_regex, c.path) for c in iter_route_contexts(routes()) if c.path)
            return next((t for regex, t in templates if regex.match(path)), "unmatched")

        return middleware
