"""Steps of the console tests in a real headless Chromium (the `browser` fixture of tests/service/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx


def until(driver: Any, condition: Callable[[Any], Any], timeout: float = 120) -> Any:
    """Waits for a condition of the page. The console redraws what changed (job rows as they are polled, the
    collections table), so an element found a moment ago may be gone: the condition is then tried again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException])
    return wait.until(condition)


def click(driver: Any, selector: str) -> None:
    """Clicks the element, found again if a redraw replaced it between the look-up and the click."""

    def clicked(d: Any) -> bool:
        css(d, selector).click()
        return True

    until(driver, clicked)


def css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def find_all(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def open_console(driver: Any, client: httpx.Client) -> None:
    driver.get(f"{client.base_url}/ui")
    until(driver, lambda d: d.execute_script("return document.body.dataset.ready") == "true")


def type_into(driver: Any, selector: str, text: str) -> None:
    field = css(driver, selector)
    field.clear()
    field.send_keys(text)


def job_status(driver: Any, job_id: str) -> str | None:
    # In the page, in one step: the row may be redrawn at any poll.
    script = (
        "const row = document.querySelector(`.job[data-job-id='${arguments[0]}']`); return row && row.dataset.status"
    )
    status = driver.execute_script(script, job_id)
    return str(status) if status else None


def index_through_the_form(driver: Any, collection: str, doc_id: str, title: str, text: str) -> str:
    """Fills and sends the index form; waits until its job has ended and returns its final status."""
    type_into(driver, "#index-collection", collection)
    type_into(driver, "#index-doc-id", doc_id)
    type_into(driver, "#index-title", title)
    type_into(driver, "#index-text", text)
    css(driver, "#index-submit").click()
    job_id = until(driver, lambda d: css(d, "#index-result").get_attribute("data-job-id"))
    ended = ("succeeded", "failed", "cancelled")
    return str(until(driver, lambda d: job_status(d, job_id) in ended and job_status(d, job_id)))


def console_errors(driver: Any) -> list[str]:
    """The errors the page logged to its JS console (a failed request included) since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def requested_urls(driver: Any) -> list[str]:
    """The URLs the page requested since the last call, in order (the DevTools Network.requestWillBeSent events)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(str(message["params"]["request"]["url"]))
    return urls


class PageRequests:
    """The requests of the page from now on, counted by path as the test goes (the performance log is read once)."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        requested_urls(driver)  # what came before is not counted
        self.urls: list[str] = []

    def to(self, path: str) -> int:
        """How many requests went to this path (any query), so far."""
        self.urls += requested_urls(self.driver)
        return sum(1 for url in self.urls if urlsplit(url).path == path)
