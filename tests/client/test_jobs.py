"""Jobs through both clients: get, cancel, retry, and waiting with progress reports and a timeout.

Two server-side faults make the job states these need, on a real server: a gate that holds a job in its commit
(so the next job stays queued, and a wait can time out), and a commit that fails once (a failed job to retry).
Both act only on collections named for them; everything else on the shared server runs as usual.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from vela_client import Conflict, Job, JobFailed, JobWaitTimeout, NotFound, VelaClient

from tests import job_faults

GATED = "gated-"
FLAKY = "flaky-"

gate, fail_once = job_faults.gate, job_faults.fail_once  # fixtures: faults injected into jobs by name


def test_unknown_job_is_not_found_on_every_job_route(client: VelaClient) -> None:
    for action in (client.get_job, client.cancel_job, client.retry_job, client.wait_job):
        with pytest.raises(NotFound) as err:
            action("no-such-job")
        assert (err.value.status, err.value.code) == (404, "job_not_found")


def test_wait_times_out_cancel_a_queued_job_then_progress_to_the_end(
    client: VelaClient, unique: Callable[[str], str], gate: threading.Event
) -> None:
    name = unique(GATED.rstrip("-"))
    held = client.index(name, [{"id": f"d{i}", "text": f"held document {i}"} for i in range(3)])
    with pytest.raises(JobWaitTimeout) as waited:
        client.wait_job(held, timeout=0.3)
    assert waited.value.job.id == held.job_id and waited.value.job.status in ("queued", "running")
    assert isinstance(waited.value, TimeoutError)

    behind = client.index(name, [{"id": "late", "text": "queued behind the held job"}])
    cancelled = client.cancel_job(behind)
    assert isinstance(cancelled, Job) and cancelled.status == "cancelled"
    with pytest.raises(Conflict) as again:
        client.cancel_job(behind.job_id)
    assert again.value.status == 409 and "already ended" in again.value.message

    gate.set()
    seen: list[Job] = []
    final = client.wait_job(held, on_progress=seen.append, timeout=120)
    assert final.succeeded and final.done == final.total == 3
    assert seen[-1] == final
    order = ["queued", "running", "succeeded"]
    assert [order.index(j.status) for j in seen] == sorted(order.index(j.status) for j in seen)

    with pytest.raises(JobFailed) as failed:
        client.wait_job(behind)
    assert failed.value.job.status == "cancelled" and failed.value.code == "job_cancelled"
    assert client.wait_job(behind, check=False).status == "cancelled"
    assert client.get_collection(name).documents == 3


def test_retry_a_failed_job(client: VelaClient, unique: Callable[[str], str], fail_once: None) -> None:
    name = unique(FLAKY.rstrip("-"))
    with pytest.raises(JobFailed) as failed:
        client.index(name, [{"id": "a", "text": "tides and moons"}], wait=True)
    job = failed.value.job
    assert job.status == "failed" and job.error and "No space left" in job.error
    requeued = client.retry_job(job)
    assert requeued.id == job.id and requeued.status == "queued"
    assert client.wait_job(job.id).attempts == 2
    assert client.get_collection(name).documents == 1
    with pytest.raises(Conflict) as again:
        client.retry_job(job.id)
    assert again.value.code == "conflict"


def test_list_jobs_filters_and_pages(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("listed")
    made = [client.index(name, [{"id": f"d{i}", "text": f"tides {i}"}], wait=True).id for i in range(3)]
    page = client.list_jobs(collection=name, limit=2)
    assert [j.id for j in page.jobs] == made[:0:-1] and page.next_cursor is not None
    rest = client.list_jobs(collection=name, limit=2, cursor=page.next_cursor)
    assert [j.id for j in rest.jobs] == made[:1] and rest.next_cursor is None
    assert len(client.list_jobs(collection=name, status="succeeded", kind=["upsert"]).jobs) == 3
    assert client.list_jobs(collection=name, status=["queued", "running"]).jobs == []
