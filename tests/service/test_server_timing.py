"""Server-Timing: every response says where its time went (service/timing.py), through a real server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import running_server, wait_job

METRIC = re.compile(r"^([a-z0-9]+);dur=(\d+\.\d+)$")
DOCS = [
    {"id": "tides", "title": "Tides", "text": "Tides are caused by the gravity of the moon and the sun."},
    {"id": "photo", "text": "Photosynthesis turns light, water and carbon dioxide into sugar."},
    {"id": "rust", "text": "Iron rusts when it reacts with oxygen and water."},
]


def stages(response: httpx.Response) -> dict[str, float]:
    """The Server-Timing header as {stage: ms}; every entry must be `name;dur=<ms>`."""
    out = {}
    for part in response.headers["server-timing"].split(", "):
        m = METRIC.match(part)
        assert m, f"bad Server-Timing entry {part!r}"
        out[m.group(1)] = float(m.group(2))
    return out


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("timing"), embedder=str(tiny_embedder_dir)) as c:
        r = c.post("/index", json={"collection": "notes", "documents": DOCS})
        assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        yield c


@pytest.mark.parametrize(
    ("mode", "want"),
    [
        ("hybrid", {"queue", "encode", "engine", "dense", "bm25", "fuse", "hydrate", "serialize", "total"}),
        ("dense", {"queue", "encode", "engine", "dense", "fuse", "hydrate", "serialize", "total"}),
        ("bm25", {"engine", "bm25", "fuse", "hydrate", "serialize", "total"}),
    ],
)
def test_a_search_reports_its_stages(client: httpx.Client, mode: str, want: set[str]) -> None:
    r = client.post("/search", json={"collection": "notes", "query": "what causes tides", "mode": mode, "k": 2})
    assert r.status_code == 200, r.text
    got = stages(r)
    assert set(got) == want
    # The stages happen one after another inside the request, so together they cannot exceed its total;
    # dense, bm25 and fuse are parts of the engine call.
    parts = {"dense", "bm25", "fuse"}
    assert sum(v for k, v in got.items() if k != "total" and k not in parts) <= got["total"] + 0.01
    assert sum(v for k, v in got.items() if k in parts) <= got["engine"] + 0.01


def test_a_batch_search_reports_its_stages(client: httpx.Client) -> None:
    body = {"collection": "notes", "queries": ["tides", "sugar from light", "rust"], "mode": "hybrid", "k": 2}
    r = client.post("/search/batch", json=body)
    assert r.status_code == 200, r.text
    assert {"encode", "engine", "hydrate", "serialize", "total"} <= set(stages(r))


def test_every_response_has_a_total_even_errors(client: httpx.Client) -> None:
    assert set(stages(client.get("/healthz"))) == {"total"}
    r = client.post("/search", json={"collection": "nowhere", "query": "x"})
    assert r.status_code == 404 and "total" in stages(r)


def test_the_stages_are_prometheus_histograms_too(client: httpx.Client) -> None:
    client.post("/search", json={"collection": "notes", "query": "what causes tides", "mode": "hybrid", "k": 2})
    text = client.get("/metrics").text
    for stage in ("encode", "engine", "dense", "bm25", "fuse", "hydrate", "serialize"):
        assert f'vela_request_stage_seconds_count{{route="/search",stage="{stage}"}}' in text, stage
