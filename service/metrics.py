"""Prometheus metrics: request counts and latencies per route and search mode, and index sizes."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence

from fastapi.routing import iter_route_contexts
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from indexing.store import CollectionStore
from service import timing

LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class IndexSizeCollector(Collector):
    """Reads sizes at scrape time from the collections this process has open."""

    def __init__(self, collections: CollectionStore) -> None:
        self.collections = collections

    def collect(self) -> Iterator[GaugeMetricFamily]:
        docs = GaugeMetricFamily("vela_collection_documents", "documents in a collection", labels=["collection"])
        passages = GaugeMetricFamily("vela_index_passages", "passages in the published index", labels=["collection"])
        size = GaugeMetricFamily("vela_index_bytes", "bytes of the published index files", labels=["collection"])
        for name in self.collections.names():
            try:
                s = self.collections.get(name).stats()
            except Exception:  # a collection being deleted or rebuilt must not break the scrape
                continue
            docs.add_metric([name], s["documents"])
            passages.add_metric([name], s["index"]["passages"])
            size.add_metric([name], s["index"]["bytes"])
        yield from (docs, passages, size)


class Metrics:
    def __init__(self, collections: CollectionStore, *, multiprocess: bool = False) -> None:
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
        self.search_latency = Histogram(
            "vela_search_duration_seconds",
            "search latency per mode and dense dim",
            ["mode", "dim"],
            buckets=LATENCY_BUCKETS,
            registry=own,
        )
        self.search_queries = Counter("vela_search_queries_total", "queries searched", ["mode", "dim"], registry=own)
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
        self.rerank_pairs = Counter("vela_rerank_pairs_total", "(query, passage) pairs scored", registry=own)
        self.rerank_latency = Histogram(
            "vela_rerank_duration_seconds",
            "rerank stage time per query",
            buckets=LATENCY_BUCKETS,
            registry=own,
        )
        self.registry.register(IndexSizeCollector(collections))

    def observe_rerank(self, *, status: str, pairs: int, seconds: float) -> None:
        self.rerank_queries.labels(status).inc()
        self.rerank_pairs.inc(pairs)
        self.rerank_latency.observe(seconds)

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
