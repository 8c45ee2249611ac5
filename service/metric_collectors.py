"""Metrics read at scrape time: collection and index sizes, and the job store's counts.

They are registered once on the registry a scrape reads (service/metrics.py), not in prometheus_client's
multiprocess files: with several API processes the one that answers the scrape reads them from the shared data
directory, so a value is reported once, not once per process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from indexing.jobs import JobStore
from indexing.store import CollectionStore

log = logging.getLogger("vela.service")


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


class JobCollector(Collector):
    """Jobs by kind and status now, and the totals of jobs finished and documents indexed, from the job store
    (indexing/job_counts.py): they include the jobs every process ran, `vela worker`s' too. Labels are the job
    kinds and statuses, a fixed set."""

    def __init__(self, jobs: JobStore) -> None:
        self.jobs = jobs

    def collect(self) -> Iterator[Metric]:
        try:
            counts = self.jobs.counts()
        except Exception:  # a busy or damaged job store must not break the scrape of everything else
            log.warning("job counts unavailable for /metrics", exc_info=True)
            return
        jobs = GaugeMetricFamily("vela_jobs", "jobs in the job store, by kind and status", labels=["kind", "status"])
        for (kind, status), n in sorted(counts.by_status.items()):
            jobs.add_metric([kind, status], n)
        finished = CounterMetricFamily(
            "vela_jobs_finished", "jobs that ended, by kind and final status", labels=["kind", "status"]
        )
        for (kind, status), n in sorted(counts.finished.items()):
            finished.add_metric([kind, status], n)
        documents = CounterMetricFamily(
            "vela_documents_indexed", "documents that upsert and reindex jobs went through", labels=["kind"]
        )
        for kind, n in sorted(counts.documents.items()):
            documents.add_metric([kind], n)
        yield from (jobs, finished, documents)
