"""Prometheus metrics: request counts and latencies per route and search mode, and index sizes."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from indexing.collection import CollectionStore

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
    def __init__(self, collections: CollectionStore) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "vela_http_requests_total", "HTTP requests", ["route", "method", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "vela_http_request_duration_seconds",
            "HTTP request latency",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.search_latency = Histogram(
            "vela_search_duration_seconds",
            "search latency per mode and dense dim",
            ["mode", "dim"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.search_queries = Counter(
            "vela_search_queries_total", "queries searched", ["mode", "dim"], registry=self.registry
        )
        self.encoder_batch = Histogram(
            "vela_query_encoder_batch_texts",
            "queries per micro-batched encoder pass",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=self.registry,
        )
        self.registry.register(IndexSizeCollector(collections))

    async def middleware(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        start = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            # The route template, not the raw path, keeps label cardinality bounded.
            path = getattr(route, "path", "unmatched")
            self.requests.labels(path, request.method, str(status)).inc()
            self.latency.labels(path, request.method).observe(time.perf_counter() - start)
