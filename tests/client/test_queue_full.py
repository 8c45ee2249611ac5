"""`index_in_batches` against a server whose job queue holds one job (VELA_MAX_QUEUED_JOBS=1): every batch after the
first meets 503 `queue_full` while the call's own earlier job runs. The call waits for that job to end and sends the
batch again, so the corpus goes in whole, with or without `wait`, and however short the client's retries are."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from vela_client import Job, JobAccepted, JobWaitTimeout, RetryPolicy, Unavailable, VelaClient

from tests.client.conftest import API_KEY, ClientFactory
from tests.service.conftest import running_app

# Retries that give up at once: a batch that goes in after a queue_full went in by waiting for a job, not by them.
NO_PATIENCE = RetryPolicy(attempts=2, backoff_s=0.01, max_backoff_s=0.01, max_retry_after_s=0.01)


@pytest.fixture(scope="module")
def one_job_url(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[str]:
    settings = {"api_keys": API_KEY, "embedder": str(tiny_embedder_dir), "max_queued_jobs": 1}
    with running_app(tmp_path_factory.mktemp("vela-one-job"), **settings) as (http, _):
        yield str(http.base_url)


def docs(n: int) -> list[dict[str, Any]]:
    return [{"id": f"q{i:03}", "text": f"passage {i} on river otters " + "and their dens " * 150} for i in range(n)]


def counting_client(make_client: ClientFactory, flavor: str, url: str) -> tuple[VelaClient, list[str]]:
    """A client that gives up on retries at once, and the error codes of the 503s it was answered."""
    codes: list[str] = []

    def record(response: httpx.Response) -> None:
        if response.status_code == 503:
            response.read()
            codes.append(response.json()["error"]["code"])

    async def record_async(response: httpx.Response) -> None:
        if response.status_code == 503:
            await response.aread()
            codes.append(response.json()["error"]["code"])

    hook = record_async if flavor == "async" else record
    client = make_client(url, retry=NO_PATIENCE, http_options={"event_hooks": {"response": [hook]}})
    return client, codes


@pytest.mark.parametrize("wait", [True, False], ids=["wait", "no-wait"])
def test_a_full_queue_waits_for_the_calls_own_job_and_the_corpus_goes_in_whole(
    make_client: ClientFactory, flavor: str, one_job_url: str, unique: Callable[[str], str], wait: bool
) -> None:
    client, codes = counting_client(make_client, flavor, one_job_url)
    name = unique("queue")
    jobs = client.index_in_batches(name, docs(300), batch_size=100, wait=wait)
    assert len(jobs) == 3 and "queue_full" in codes  # the queue was full, and that did not end the call
    if wait:
        assert all(isinstance(job, Job) and job.succeeded for job in jobs)
    else:
        assert all(isinstance(job, JobAccepted) for job in jobs)
        for job in jobs:
            assert client.wait_job(job).succeeded
    assert client.get_collection(name).documents == 300


def test_waiting_for_room_keeps_to_the_calls_timeout(
    make_client: ClientFactory, flavor: str, one_job_url: str, unique: Callable[[str], str]
) -> None:
    client, _ = counting_client(make_client, flavor, one_job_url)
    name = unique("queue-timeout")
    with pytest.raises(JobWaitTimeout) as late:
        client.index_in_batches(name, docs(300), batch_size=100, wait=True, timeout=0)
    assert any("the server had accepted the first 100 documents" in note for note in late.value.__notes__)
    for job in client.list_jobs(collection=name).jobs:
        client.wait_job(job, check=False)


def test_a_full_queue_with_no_job_of_the_call_is_retried_after_retry_after(
    make_client: ClientFactory, flavor: str, one_job_url: str, unique: Callable[[str], str]
) -> None:
    """Another client's job fills the queue: the call has nothing of its own to wait for, so its retries apply
    (here, too few), and it says nothing was sent."""
    other = make_client(one_job_url)
    busy = other.index(unique("queue-other"), docs(100))
    client, codes = counting_client(make_client, flavor, one_job_url)
    try:
        with pytest.raises(Unavailable) as full:
            client.index_in_batches(unique("queue-none"), docs(3))
        assert full.value.code == "queue_full" and codes == ["queue_full", "queue_full"]  # both tries
        assert any("nothing had been sent" in note for note in full.value.__notes__)
    finally:
        other.wait_job(busy)
