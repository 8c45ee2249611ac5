"""A real uvicorn server on a loopback port, over a fresh data directory, driven with httpx."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from service.main import create_app
from service.server import uvicorn_config
from service.settings import Settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(data_dir: Path, **overrides: Any) -> Iterator[httpx.Client]:
    with running_app(data_dir, **overrides) as (client, _):
        yield client


@contextmanager
def running_app(data_dir: Path, **overrides: Any) -> Iterator[tuple[httpx.Client, FastAPI]]:
    """The server of `running_server`, and its app (for tests that reach into the process, e.g. its state)."""
    settings = Settings(data_dir=data_dir, **overrides)
    port = _free_port()
    app = create_app(settings)
    server = uvicorn.Server(uvicorn_config(app, settings, host="127.0.0.1", port=port, access_log=True))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 60
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            yield client, app
    finally:
        server.should_exit = True
        thread.join(30)


def wait_job(client: httpx.Client, job_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = client.get(f"/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return dict(job)
        time.sleep(0.05)
    raise TimeoutError(job_id)


OK_DOC = {"id": "a", "text": "some text"}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server with small limits, so that the 413 paths are cheap to reach, holding one document in "c"."""
    with running_server(
        tmp_path_factory.mktemp("small"),
        max_document_bytes=1000,
        max_batch_documents=5,
        max_batch_queries=3,
        max_request_bytes=100_000,
    ) as client:
        r = client.post("/index", json={"collection": "c", "documents": [OK_DOC]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        yield client


def error_body(r: httpx.Response) -> dict[str, Any]:
    """The error body without its request id (every error carries one; it differs per request)."""
    err = dict(r.json()["error"])
    assert err.pop("request_id") == r.headers["x-request-id"]
    return err


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("vela")) as client:
        yield client


@pytest.fixture
def index_docs(server: httpx.Client) -> Callable[..., dict[str, Any]]:
    def _index(collection: str, documents: list[dict[str, Any]]) -> dict[str, Any]:
        r = server.post("/index", json={"collection": collection, "documents": documents})
        assert r.status_code == 202, r.text
        job = wait_job(server, r.json()["job_id"])
        assert job["status"] == "succeeded", job
        return job

    return _index


# Driving the web console in a real headless Chromium: Selenium and Debian's chromium-driver (`make browser` installs
# both); without them the tests that use it skip. Steps: tests/service/console_browser.py.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip("Chromium is not installed: `make browser` (or apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (requirements.lock)")
    options = webdriver.ChromeOptions()
    # Both paths given: Selenium Manager has nothing to look up or download.
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--window-size=1440,1000",
    ):
        options.add_argument(arg)
    # The page's console messages (errors included) and its network events, read with driver.get_log("browser") and
    # driver.get_log("performance") (tests/service/console_browser.py: console_errors, requested_urls).
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
