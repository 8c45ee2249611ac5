"""/metrics through a real server, read with prometheus_client's own parser: search labels and what each search
metric counts, the job store's counts, and the process metrics of a one-process server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from indexing.jobs import JobKind, JobStatus
from tests.service.conftest import running_server, wait_job

DOCS = [
    {"id": "tides", "text": "Tides are caused by the gravity of the moon and the sun."},
    {"id": "photo", "text": "Photosynthesis turns light, water and carbon dioxide into sugar."},
    {"id": "rust", "text": "Iron rusts when it reacts with oxygen and water."},
]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: httpx.Client) -> Samples:
    """Every sample of /metrics: (name, labels) -> value."""
    r = client.get("/metrics")
    assert r.status_code == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def series(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(labels) for n, labels in samples if n == name]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("metrics"), embedder=str(tiny_embedder_dir)) as c:
        r = c.post("/index", json={"collection": "notes", "documents": DOCS})
        assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        yield c


def test_bm25_searches_are_labelled_dim_none(client: httpx.Client) -> None:
    r = client.post("/search", json={"collection": "notes", "query": "moon gravity", "mode": "bm25"})
    assert r.status_code == 200, r.text
    samples = scrape(client)
    assert value(samples, "vela_search_queries_total", mode="bm25", dim="none") == 1
    assert value(samples, "vela_search_duration_seconds_count", mode="bm25", dim="none") == 1
    dims = {s["dim"] for s in series(samples, "vela_search_queries_total") if s["mode"] == "bm25"}
    assert dims == {"none"}


def test_the_histogram_counts_requests_and_the_counter_queries(client: httpx.Client) -> None:
    body = {"collection": "notes", "queries": ["tides", "sugar from light", "rust"], "mode": "dense"}
    assert client.post("/search/batch", json=body).status_code == 200
    samples = scrape(client)
    assert value(samples, "vela_search_queries_total", mode="dense", dim="full") == 3
    assert value(samples, "vela_search_duration_seconds_count", mode="dense", dim="full") == 1


def test_jobs_by_kind_and_status_and_the_totals(client: httpx.Client) -> None:
    r = client.delete("/collections/notes/documents/rust")
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    samples = scrape(client)
    # Every kind and status has its series, so the set is fixed and a gauge never vanishes.
    assert len(series(samples, "vela_jobs")) == len(JobKind) * len(JobStatus)
    assert value(samples, "vela_jobs", kind="upsert", status="succeeded") == 1
    assert value(samples, "vela_jobs", kind="delete", status="succeeded") == 1
    assert value(samples, "vela_jobs", kind="upsert", status="queued") == 0
    assert value(samples, "vela_jobs_finished_total", kind="upsert", status="succeeded") == 1
    assert value(samples, "vela_jobs_finished_total", kind="delete", status="succeeded") == 1
    assert value(samples, "vela_documents_indexed_total", kind="upsert") == len(DOCS)
    assert value(samples, "vela_documents_indexed_total", kind="reindex") == 0


def test_one_process_exports_its_process_metrics(client: httpx.Client) -> None:
    samples = scrape(client)
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "process_cpu_seconds_total") > 0
    assert series(samples, "python_info")


def test_the_job_totals_outlive_a_restart(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    """Kept in the job store, not in the process: a restarted server goes on from them (a counter that does not
    fall back to 0 at each restart)."""
    with running_server(tmp_path, embedder=str(tiny_embedder_dir)) as c:
        r = c.post("/index", json={"collection": "notes", "documents": DOCS[:2]})
        assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
    with running_server(tmp_path, embedder=str(tiny_embedder_dir)) as c:
        samples = scrape(c)
    assert value(samples, "vela_jobs_finished_total", kind="upsert", status="succeeded") == 1
    assert value(samples, "vela_documents_indexed_total", kind="upsert") == 2
