"""The console's Jobs panel in a real headless Chromium: recent jobs listed from GET /jobs, page by page and
filtered; a followed id the server does not know ends its following; polling backs off while the server cannot be
reached."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.conftest import running_server, wait_job
from tests.service.console_browser import (
    PageRequests,
    click,
    css,
    find_all,
    job_status,
    open_console,
    type_into,
    until,
)
from velaio.files import file_lock

pytestmark = pytest.mark.browser
PAGE_SIZE = 20  # the console's page of recent jobs (job_list.js)
UNKNOWN = "no-such-job"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    """A server that has run PAGE_SIZE + 1 jobs: the upserts of "a" and "b" taking turns, then one delete."""
    data_dir = tmp_path_factory.mktemp("console-jobs")
    with running_server(data_dir) as client:
        for n in range(PAGE_SIZE):
            name = "ab"[n % 2]
            r = client.post("/index", json={"collection": name, "documents": [{"id": f"d{n}", "text": "tides"}]})
            assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        assert wait_job(client, client.delete("/collections/a/documents/d0").json()["job_id"])["status"] == "succeeded"
        yield client, data_dir


@pytest.fixture
def console(browser: Any, server: tuple[httpx.Client, Path]) -> Any:
    """The console opened afresh, following no job."""
    open_console(browser, server[0])
    browser.execute_script("sessionStorage.clear()")
    open_console(browser, server[0])
    return browser


def _listed(driver: Any) -> list[str]:
    return [str(row.get_attribute("data-job-id")) for row in find_all(driver, "#job-list tr.listed-job")]


def _ids(client: httpx.Client, **params: Any) -> list[str]:
    return [job["id"] for job in client.get("/jobs", params={"limit": 1000, **params}).json()["jobs"]]


def test_recent_jobs_are_listed_newest_first_with_more_and_filters(
    console: Any, server: tuple[httpx.Client, Path]
) -> None:
    client, _ = server
    every = _ids(client)
    assert len(every) == PAGE_SIZE + 1
    assert "no route" not in console.page_source  # the page no longer says jobs cannot be listed
    until(console, lambda d: _listed(d) == every[:PAGE_SIZE])
    first = css(console, f'tr.listed-job[data-job-id="{every[0]}"]').text
    assert "succeeded" in first and "delete" in first and " a " in f" {first} "
    click(console, "#more-jobs")  # the second page, read with the first page's cursor
    until(console, lambda d: _listed(d) == every)
    assert not css(console, "#more-jobs").is_displayed()  # the last page has no cursor

    type_into(console, "#job-filter-collection", "b")
    click(console, "#refresh-jobs")
    until(console, lambda d: _listed(d) == _ids(client, collection="b"))
    from selenium.webdriver.support.ui import Select

    Select(css(console, "#job-filter-status")).select_by_value("failed")
    until(console, lambda d: "No jobs match." in css(d, "#job-list").text)
    Select(css(console, "#job-filter-status")).select_by_value("")
    until(console, lambda d: _listed(d) == _ids(client, collection="b"))

    # Follow from the list: the job joins the followed ones, with its progress.
    click(console, f'tr.listed-job[data-job-id="{every[1]}"] .follow')
    until(console, lambda d: job_status(d, every[1]) == "succeeded")
    assert css(console, f'.job[data-job-id="{every[1]}"] progress').get_attribute("value") == "1"


def test_an_unknown_job_id_stops_being_polled(console: Any, server: tuple[httpx.Client, Path]) -> None:
    client, data_dir = server
    requests = PageRequests(console)
    # Jobs run one at a time: with the writer lock of "a" held, a job of "a" stays unfinished until it is let go.
    # While it is followed, the page polls it every round: its requests count the rounds.
    with file_lock(data_dir / "collections" / "a" / "write.lock"):
        held = client.post("/index", json={"collection": "a", "documents": [{"id": "held", "text": "x"}]})
        held_id = held.json()["job_id"]
        type_into(console, "#follow-job-id", UNKNOWN)
        css(console, "#follow-form button").click()
        until(console, lambda d: job_status(d, UNKNOWN) == "not_found")
        row = css(console, f'.job[data-job-id="{UNKNOWN}"]')
        assert "not found" in row.text and "no job with this id" in row.text
        assert UNKNOWN not in console.execute_script("return sessionStorage.getItem('vela.jobs')")

        type_into(console, "#follow-job-id", held_id)
        css(console, "#follow-form button").click()
        until(console, lambda d: requests.to(f"/jobs/{held_id}") >= 4)  # rounds after the 404
        assert requests.to(f"/jobs/{UNKNOWN}") == 1

        open_console(console, client)  # a reload follows the stored ids: the unknown one is no longer among them
        assert not find_all(console, f'.job[data-job-id="{UNKNOWN}"]')
        asked = requests.to(f"/jobs/{held_id}")
        until(console, lambda d: requests.to(f"/jobs/{held_id}") >= asked + 3)
        assert requests.to(f"/jobs/{UNKNOWN}") == 1
    assert wait_job(client, held_id)["status"] == "succeeded"
    until(console, lambda d: job_status(d, held_id) == "succeeded")


@pytest.mark.slow  # `make test-slow`: the default suite keeps under 15 minutes
def test_polling_backs_off_while_the_server_cannot_be_reached(console: Any, server: tuple[httpx.Client, Path]) -> None:
    client, data_dir = server
    with file_lock(data_dir / "collections" / "b" / "write.lock"):
        held_id = client.post("/index", json={"collection": "b", "documents": [{"id": "held", "text": "x"}]}).json()[
            "job_id"
        ]
        type_into(console, "#follow-job-id", held_id)
        css(console, "#follow-form button").click()
        until(console, lambda d: job_status(d, held_id) in ("queued", "running"))
        assert css(console, "#jobs").get_attribute("data-poll-ms") == "500"
        # The job's URL fails as an unreachable server would: each failed round doubles the wait before the next.
        console.execute_cdp_cmd("Network.enable", {})
        console.execute_cdp_cmd("Network.setBlockedURLs", {"urls": [f"*/jobs/{held_id}"]})
        try:
            until(console, lambda d: int(css(d, "#jobs").get_attribute("data-poll-ms")) >= 4000)
            assert "asking again in" in css(console, "#jobs-error").text
        finally:
            console.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        until(console, lambda d: css(d, "#jobs").get_attribute("data-poll-ms") == "500")  # a round that worked
        assert css(console, "#jobs-error").text == ""
    until(console, lambda d: job_status(d, held_id) == "succeeded")
