"""The console with input a user or a browser may hold: metadata that JSON.parse would change, a tab's stored state
that is not the page's, a key no header can carry, an eval file without figures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.conftest import running_server
from tests.service.console_browser import css, find_all, open_console, type_into, until

pytestmark = pytest.mark.browser
KEY = "console-input-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("console-input")) as client:
        yield client


def _index(driver: Any, doc_id: str, metadata: str) -> str:
    """Sends the index form with this metadata text; the result line (a job, or the error) once it shows."""
    type_into(driver, "#index-collection", "typed")
    type_into(driver, "#index-doc-id", doc_id)
    type_into(driver, "#index-text", "Tides follow the moon.")
    type_into(driver, "#index-metadata", metadata)
    driver.execute_script("document.getElementById('index-result').textContent = ''")
    css(driver, "#index-submit").click()
    return str(until(driver, lambda d: css(d, "#index-result").text))


def test_metadata_is_sent_as_typed(browser: Any, server: httpx.Client) -> None:
    """JSON.parse would round an integer past 2^53 and make 2005.0 an integer and 1e999 null: the text typed is
    sent instead, so the API stores what the user wrote, or refuses it."""
    open_console(browser, server)
    assert _index(browser, "big", '{"acct": 9007199254740993, "y": 2005.0}').startswith("Job ")
    job = until(browser, lambda d: css(d, "#index-result").get_attribute("data-job-id"))
    until(browser, lambda d: server.get(f"/jobs/{job}").json()["status"] == "succeeded", timeout=60)
    stored = json.loads(server.get("/collections/typed/documents/big").text)["metadata"]
    assert stored == {"acct": 9007199254740993, "y": 2005.0} and isinstance(stored["y"], float)
    shown = _index(browser, "inf", '{"n": 1e999}')
    assert shown.startswith("Index: "), shown  # the API's 422 (Infinity is not JSON it accepts)
    assert server.get("/collections/typed/documents/inf").status_code == 404


def test_a_tab_whose_stored_jobs_are_not_the_pages_still_starts(browser: Any, server: httpx.Client) -> None:
    open_console(browser, server)
    for stored in ("not json", '{"an": "object"}', '[1, null, "a-job-id-that-is-not-stored"]'):
        browser.execute_script("sessionStorage.setItem('vela.jobs', arguments[0])", stored)
        open_console(browser, server)  # waits for the page to say it is ready
        until(browser, lambda d: css(d, "#server-status").text.startswith("ready"), timeout=30)
    browser.execute_script("sessionStorage.clear()")


def test_a_key_no_header_can_carry_is_refused_in_the_dialog(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with running_server(tmp_path_factory.mktemp("console-key"), api_keys=KEY) as keyed:
        open_console(browser, keyed)
        browser.execute_script("sessionStorage.clear()")
        open_console(browser, keyed)
        dialog = css(browser, "#key-dialog")
        until(browser, lambda d: dialog.is_displayed())
        type_into(browser, "#api-key", "ключ")
        css(browser, "#key-submit").click()
        until(browser, lambda d: "cannot be sent" in css(d, "#key-error").text)
        assert dialog.is_displayed() and browser.execute_script("return sessionStorage.getItem('vela.apiKey')") is None
        type_into(browser, "#api-key", KEY)
        css(browser, "#key-submit").click()
        until(browser, lambda d: find_all(d, "#no-collections"))
        browser.execute_script("sessionStorage.clear()")


def test_an_eval_file_without_figures_is_named_not_drawn(browser: Any, server: httpx.Client, tmp_path: Path) -> None:
    open_console(browser, server)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"dataset": "scifact", "metrics": {}}))
    css(browser, "#eval-files").send_keys(str(empty))
    assert "empty.json: not a vela eval result" in until(browser, lambda d: css(d, "#evals-error").text)
    assert not find_all(browser, "#evals figure")
