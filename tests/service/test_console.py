"""The web console at /ui: its files over real HTTP, and the page itself in a real headless Chromium.

The browser tests drive Debian's `chromium` through `chromium-driver` with Selenium (`make browser` installs both);
without them they skip. Set VELA_CONSOLE_SCREENSHOT=path to save the console, with a collection, a search and an
eval chart, as a PNG (docs/console.png is made that way).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.conftest import running_server, wait_job
from tests.service.console_browser import (
    PageRequests,
    click,
    console_errors,
    css,
    find_all,
    index_through_the_form,
    job_status,
    open_console,
    type_into,
    until,
)
from velaio.files import file_lock

REPO_ROOT = Path(__file__).resolve().parents[2]
EVAL_RESULT = REPO_ROOT / "bench" / "results" / "eval-scifact.json"
KEY = "console-test-key"
DOCS = [
    {
        "id": "berlin",
        "title": "Berlin",
        "text": "Berlin is the capital of Germany and has 3.7 million inhabitants.",
        "metadata": {"kind": "city"},
    },
    {
        "id": "paris",
        "title": "Paris",
        "text": "Paris is the capital and largest city of France.",
        "metadata": {"kind": "city"},
    },
    {"id": "photo", "text": "Photosynthesis converts light energy into chemical energy in plants."},
]
TIDES = "Tides are caused by the gravity of the moon and the sun."


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    data_dir = tmp_path_factory.mktemp("console")
    with running_server(data_dir) as client:
        yield client, data_dir


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("console-keys"), api_keys=KEY) as client:
        yield client


# --- the files, over HTTP ------------------------------------------------------------------------------------------


def test_console_page_and_assets_are_served(open_server: tuple[httpx.Client, Path]) -> None:
    client, _ = open_server
    for path in ("/ui", "/ui/"):
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="/ui/app.js">' in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    script = client.get("/ui/app.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert client.get("/ui/app.css").headers["content-type"].startswith("text/css")


def test_only_the_console_files_are_served(open_server: tuple[httpx.Client, Path]) -> None:
    client, _ = open_server
    for path in ("/ui/nope.js", "/ui/__init__.py", "/ui/..%2F__init__.py", "/ui/static"):
        r = client.get(path)
        assert r.status_code == 404, path
        assert r.json()["error"]["code"] == "not_found"


def test_the_console_is_not_an_api_operation(open_server: tuple[httpx.Client, Path]) -> None:
    paths = open_server[0].get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]


def test_with_keys_the_console_is_public_and_the_api_is_not(keyed_server: httpx.Client) -> None:
    assert keyed_server.get("/ui").status_code == 200
    assert keyed_server.get("/ui/api.js").status_code == 200
    assert keyed_server.get("/collections").status_code == 401
    assert keyed_server.get("/collections", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


# --- the page, in Chromium -----------------------------------------------------------------------------------------


def _screenshot(driver: Any) -> None:
    """The whole page as a PNG at VELA_CONSOLE_SCREENSHOT, when that is set."""
    target = os.environ.get("VELA_CONSOLE_SCREENSHOT")
    if not target:
        return
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_bytes(base64.b64decode(shot["data"]))


@pytest.mark.browser
def test_index_through_the_console_then_find_it(browser: Any, open_server: tuple[httpx.Client, Path]) -> None:
    client, _ = open_server
    r = client.post("/index", json={"collection": "notes", "documents": DOCS})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    open_console(browser, client)
    until(browser, lambda d: find_all(d, 'tr[data-collection="notes"]'))

    assert index_through_the_form(browser, "notes", "tides", "Tides", TIDES) == "succeeded"
    row = until(browser, lambda d: (r := css(d, 'tr[data-collection="notes"]')).text.split()[1] == "4" and r.text)
    assert " default " in row  # the name, documents, passages, embedder (by name), dims, segments, version
    assert float(css(browser, ".job.succeeded progress").get_attribute("value")) == 1.0

    from selenium.webdriver.support.ui import Select

    Select(css(browser, "#search-collection")).select_by_value("notes")
    type_into(browser, "#search-query", "what causes the tides")
    css(browser, "#search-submit").click()
    first = until(browser, lambda d: find_all(d, ".hit"))[0]
    assert first.get_attribute("data-hit-id") == "tides"
    assert "fused score" in first.text and "dense rank 1" in first.text and "BM25 rank 1" in first.text
    assert f"chars 0–{len(TIDES)}" in first.text
    assert {m.text for m in find_all(first, "mark")} == {"Tides", "caused"}
    assert first.find_element("css selector", ".hit-text").text == TIDES
    # A metadata filter goes with the search: no document has this field, so nothing passes.
    type_into(browser, "#search-filter", '{"must": [{"key": "lang", "match": {"value": "de"}}]}')
    css(browser, "#search-submit").click()
    until(browser, lambda d: "No hits." in css(d, "#search-results").text)
    css(browser, "#search-filter").clear()
    type_into(browser, "#search-filter", '{"must": [')
    css(browser, "#search-submit").click()
    assert "Filter: not JSON" in until(browser, lambda d: css(d, "#search-error").text)
    assert css(browser, "#search-results").text == ""  # the previous answer is not left under the error
    css(browser, "#search-filter").clear()
    css(browser, "#search-submit").click()  # without a filter again: the hits come back
    assert until(browser, lambda d: find_all(d, ".hit"))[0].get_attribute("data-hit-id") == "tides"
    # Grouped by a field: one of the two cities, and the documents without the field each as they were.
    type_into(browser, "#search-group-by", "kind")
    css(browser, "#search-submit").click()

    def grouped(d: Any) -> list[str] | None:
        ids = [h.get_attribute("data-hit-id") for h in find_all(d, ".hit")]
        return ids if len(ids) == 3 else None

    ids = until(browser, grouped)
    assert ids[0] == "tides" and "photo" in ids and len({"berlin", "paris"} & set(ids)) == 1, ids
    css(browser, "#search-group-by").clear()
    # BM25 alone: the console sends no dim, which the API refuses in bm25 mode (no dense index is searched)
    Select(css(browser, "#search-mode")).select_by_value("bm25")
    css(browser, "#search-submit").click()

    def answered(d: Any) -> str:
        summary = [e.text for e in find_all(d, "#search-summary") if " bm25 " in e.text]
        return str(css(d, "#search-error").text or (summary[0] if summary else ""))

    summary = until(browser, answered)
    assert " bm25 · k 10" in summary and "dim" not in summary, summary
    assert find_all(browser, ".hit")[0].get_attribute("data-hit-id") == "tides"

    loaded = json.loads(EVAL_RESULT.read_text())
    css(browser, "#eval-files").send_keys(str(EVAL_RESULT))
    bars = until(browser, lambda d: find_all(d, "#evals svg rect.bar"))
    assert len(bars) == sum(len(metrics) for metrics in loaded["metrics"].values())
    assert loaded["dataset"] in css(browser, "#evals figcaption").text
    _screenshot(browser)


@pytest.mark.browser
def test_cancel_a_queued_job_from_the_console(browser: Any, open_server: tuple[httpx.Client, Path]) -> None:
    client, data_dir = open_server
    r = client.post("/index", json={"collection": "blocker", "documents": DOCS[:1]})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    # Jobs run one at a time. Holding the writer lock of "blocker" holds its next job, so the job after it stays
    # queued until the lock is let go: there is no race between the click and the job.
    with file_lock(data_dir / "collections" / "blocker" / "write.lock"):
        client.post("/index", json={"collection": "blocker", "documents": DOCS[1:2]})
        queued = client.post("/index", json={"collection": "later", "documents": DOCS[2:]}).json()["job_id"]
        open_console(browser, client)
        type_into(browser, "#follow-job-id", queued)
        css(browser, "#follow-form button").click()
        until(browser, lambda d: job_status(d, queued) == "queued" and find_all(d, f'[data-job-id="{queued}"] .cancel'))
        click(browser, f'[data-job-id="{queued}"] .cancel')
        until(browser, lambda d: job_status(d, queued) == "cancelled")
    assert wait_job(client, queued)["status"] == "cancelled"


@pytest.mark.browser
def test_with_keys_the_console_asks_for_one(browser: Any, keyed_server: httpx.Client) -> None:
    open_console(browser, keyed_server)
    browser.execute_script("sessionStorage.clear()")
    open_console(browser, keyed_server)
    dialog = css(browser, "#key-dialog")
    until(browser, lambda d: dialog.is_displayed())
    assert "missing API key" in css(browser, "#collections-error").text

    type_into(browser, "#api-key", "not-the-key")
    css(browser, "#key-submit").click()
    until(browser, lambda d: "invalid API key" in css(d, "#key-error").text and dialog.is_displayed())

    type_into(browser, "#api-key", KEY)
    css(browser, "#key-submit").click()
    until(browser, lambda d: find_all(d, "#no-collections"))
    assert not dialog.is_displayed()
    assert browser.execute_script("return sessionStorage.getItem('vela.apiKey')") == KEY
    assert browser.execute_script("return localStorage.length") == 0
    assert browser.execute_script("return document.cookie") == ""
    # Every call carries the key: the POST /index and each GET /jobs/{id} of the job.
    assert index_through_the_form(browser, "keyed", "tides", "Tides", TIDES) == "succeeded"
    until(browser, lambda d: find_all(d, 'tr[data-collection="keyed"]'))


def _loaded_without_console_errors(driver: Any, client: httpx.Client) -> None:
    """Opens the console and waits for its second status check (it checks every 5 s), well after the browser
    would have asked for an icon; then nothing may have failed: no /favicon.ico, no JS console error."""
    requests = PageRequests(driver)
    console_errors(driver)  # what earlier pages logged
    open_console(driver, client)
    until(driver, lambda d: requests.to("/readyz") >= 2, timeout=60)
    assert requests.to("/favicon.ico") == 0
    assert console_errors(driver) == []


@pytest.mark.browser
def test_the_console_loads_without_console_errors(browser: Any, open_server: tuple[httpx.Client, Path]) -> None:
    client, _ = open_server
    open_console(browser, client)
    browser.execute_script("sessionStorage.clear()")
    _loaded_without_console_errors(browser, client)


@pytest.mark.browser
def test_with_a_key_the_console_loads_without_console_errors(browser: Any, keyed_server: httpx.Client) -> None:
    open_console(browser, keyed_server)
    browser.execute_script("sessionStorage.clear(); sessionStorage.setItem('vela.apiKey', arguments[0])", KEY)
    _loaded_without_console_errors(browser, keyed_server)
