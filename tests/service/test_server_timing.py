"""Server-Timing: every response says where its time went (service/timing.py), through a real server."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import running_app, running_server, wait_job

METRIC = re.compile(r"^([a-z0-9]+);dur=(\d+\.\d+)$")
ALWAYS = {"wait", "other", "total"}  # every response's: the event loop's backlog, the remainder, the whole
SEARCH = {"thread"}  # a search's hand-off to the thread pool
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
        ("hybrid", {"queue", "encode", "engine", "dense", "bm25", "fuse", "hydrate", "serialize"} | ALWAYS | SEARCH),
        ("dense", {"queue", "encode", "engine", "dense", "fuse", "hydrate", "serialize"} | ALWAYS | SEARCH),
        ("bm25", {"engine", "bm25", "fuse", "hydrate", "serialize"} | ALWAYS | SEARCH),
    ],
)
def test_a_search_reports_its_stages(client: httpx.Client, mode: str, want: set[str]) -> None:
    r = client.post("/search", json={"collection": "notes", "query": "what causes tides", "mode": mode, "k": 2})
    assert r.status_code == 200, r.text
    got = stages(r)
    assert set(got) == want
    # The stages happen one after another inside the request, and `other` is what they leave of the total: they
    # add up to it (each is rounded to a microsecond). dense, bm25 and fuse are parts of the engine call.
    parts = {"dense", "bm25", "fuse"}
    named = [v for k, v in got.items() if k != "total" and k not in parts]
    assert sum(named) == pytest.approx(got["total"], abs=0.001 * len(named))
    assert sum(v for k, v in got.items() if k in parts) <= got["engine"] + 0.01


def test_a_batch_search_reports_its_stages(client: httpx.Client) -> None:
    body = {"collection": "notes", "queries": ["tides", "sugar from light", "rust"], "mode": "hybrid", "k": 2}
    r = client.post("/search/batch", json=body)
    assert r.status_code == 200, r.text
    assert {"encode", "engine", "hydrate", "serialize", "total"} <= set(stages(r))


def test_every_response_has_a_total_even_errors(client: httpx.Client) -> None:
    assert set(stages(client.get("/healthz"))) == ALWAYS
    r = client.post("/search", json={"collection": "nowhere", "query": "x"})
    assert r.status_code == 404 and set(stages(r)) >= ALWAYS


def test_a_recommend_reports_its_hand_off_to_a_thread(client: httpx.Client) -> None:
    r = client.post("/recommend", json={"collection": "notes", "like": ["tides"], "k": 2})
    assert r.status_code == 200, r.text
    assert {"thread", "vectors", "engine", "hydrate"} | ALWAYS <= set(stages(r))


def test_the_stages_are_prometheus_histograms_too(client: httpx.Client) -> None:
    client.post("/search", json={"collection": "notes", "query": "what causes tides", "mode": "hybrid", "k": 2})
    text = client.get("/metrics").text
    for stage in ("wait", "thread", "encode", "engine", "dense", "bm25", "fuse", "hydrate", "serialize", "other"):
        assert f'vela_request_stage_seconds_count{{route="/search",stage="{stage}"}}' in text, stage


BLOCK_S = 0.3


def test_time_a_request_waits_for_the_event_loop_is_the_wait_stage(tmp_path: Path) -> None:
    """A request whose headers the server has read waits while the event loop runs something else (here a
    handler that holds the loop, as parsing a large body or any code holding the GIL on it does): that time is
    its `wait` stage, and it is inside its `total`."""
    holding = threading.Event()
    with running_app(tmp_path) as (client, app):

        async def hold_the_loop() -> dict[str, str]:
            tasks = len(asyncio.all_tasks())
            holding.set()
            # Until the second request's task exists (the server has read its headers), then hold the loop. A
            # sleep(0) puts this handler back on the loop's ready queue, ahead of the task that reading the headers
            # makes: it sees that task before the task first runs (a timer would let the task run first).
            while len(asyncio.all_tasks()) <= tasks:
                await asyncio.sleep(0)
            time.sleep(BLOCK_S)  # blocking on purpose: nothing else on the loop runs meanwhile
            return {"held": "yes"}

        app.add_api_route("/test/hold", hold_the_loop, methods=["GET"])
        with ThreadPoolExecutor(1) as pool:
            held = pool.submit(client.get, "/test/hold")
            assert holding.wait(60)
            with httpx.Client(base_url=client.base_url, timeout=60) as other:  # a connection of its own
                second = other.get("/healthz")
            assert held.result().json() == {"held": "yes"}
    got = stages(second)
    assert got["wait"] >= BLOCK_S * 1000  # read before the loop was held, run after: the whole hold at least
    assert got["total"] >= got["wait"]
