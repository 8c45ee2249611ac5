"""What only the async client has: `async with`, coroutine progress callbacks, and both anyio backends (asyncio and
trio) against the real server. Its routes are covered by the shared tests (the `async` flavor)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from vela_client import AsyncVelaClient, IndexProgress, Job, NotFound, Unavailable

from tests.client.conftest import API_KEY, FAST_RETRY
from tests.client.scripted_server import Answer, scripted_server

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_index_wait_with_a_coroutine_callback_then_search(vela_url: str, unique: Callable[[str], str]) -> None:
    name = unique("async")
    seen: list[Job] = []

    async def report(job: Job) -> None:
        seen.append(job)

    async with AsyncVelaClient(vela_url, api_key=API_KEY) as vela:
        job = await vela.index(name, [{"id": "a", "text": "otters hold hands"}], wait=True, on_progress=report)
        assert job.succeeded and seen[-1] == job
        hits = (await vela.search(name, "otters", mode="bm25")).hits
        assert [h.id for h in hits] == ["a"]
        await vela.delete_collection(name)
        with pytest.raises(NotFound):
            await vela.get_collection(name)


async def test_index_in_batches_reads_an_async_generator(
    anyio_backend: str, vela_url: str, unique: Callable[[str], str]
) -> None:
    name = unique("async-bulk")
    seen: list[IndexProgress] = []

    async def documents() -> AsyncIterator[dict[str, str]]:
        for i in range(7):
            yield {"id": f"a{i}", "text": f"otter number {i} holds hands"}

    async def report(progress: IndexProgress) -> None:
        seen.append(progress)

    async with AsyncVelaClient(vela_url, api_key=API_KEY) as vela:
        jobs = await vela.index_in_batches(name, documents(), batch_size=3, wait=True, on_progress=report)
        assert [job.total for job in jobs] == [3, 3, 1] and all(job.succeeded for job in jobs)
        assert (seen[-1].documents_done, seen[-1].batches_finished, seen[-1].total) == (7, 3, None)
        assert (await vela.get_collection(name)).documents == 7


async def test_retries_sleep_on_the_running_loop(anyio_backend: str) -> None:
    with scripted_server(Answer(503, "busy"), Answer(200, {"status": "ok"})) as script:
        async with AsyncVelaClient(script.url, retry=FAST_RETRY) as vela:
            assert (await vela.health()).status == "ok"
    assert len(script.seen) == 2
    with scripted_server(Answer(503, "busy")) as script:
        async with AsyncVelaClient(script.url, retry=FAST_RETRY) as vela:
            with pytest.raises(Unavailable):
                await vela.health()
    assert len(script.seen) == FAST_RETRY.attempts
