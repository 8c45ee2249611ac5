"""A real Vela server (uvicorn, tiny embedder, API keys on) for the client tests, and clients of both kinds.

Every test that takes `client` runs twice: once with `VelaClient`, once with `AsyncVelaClient` driven from this
thread through an anyio blocking portal (its coroutines run on a real event loop), so the two share one set of
route tests. Async-only behaviour has its own tests in test_async_client.py.
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, cast

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from vela_client import AsyncVelaClient, RetryPolicy, VelaClient

from tests.service.conftest import running_app

API_KEY = "client-test-key"
# Fast retries: the tests check how many tries are made and what is waited, not the waiting itself.
FAST_RETRY = RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.02)

ClientFactory = Callable[..., VelaClient]


@pytest.fixture(scope="package")
def vela_url(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[str]:
    """The server's base URL. Keys on, /metrics protected too, so that every route has a 401 to check."""
    settings = {"api_keys": API_KEY, "protect_metrics": True, "embedder": str(tiny_embedder_dir)}
    with running_app(tmp_path_factory.mktemp("vela-client"), **settings) as (http, _):
        yield str(http.base_url)


class BlockingAsync:
    """`AsyncVelaClient` with `VelaClient`'s calling convention: each coroutine method runs on the portal's loop."""

    def __init__(self, client: AsyncVelaClient, portal: BlockingPortal) -> None:
        self._client = client
        self._portal = portal

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._portal.call(functools.partial(attr, *args, **kwargs))

        return call

    def close(self) -> None:
        self._portal.call(self._client.aclose)


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_client(flavor: str, vela_url: str) -> Iterator[ClientFactory]:
    """Makes clients of this test's flavor (the test server and its key unless told otherwise); closes them."""
    with ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal()) if flavor == "async" else None

        def make(base_url: str | None = None, *, api_key: str | None = API_KEY, **options: Any) -> VelaClient:
            url = base_url or vela_url
            if portal is None:
                return stack.enter_context(VelaClient(url, api_key=api_key, **options))
            async_client = portal.call(functools.partial(AsyncVelaClient, url, api_key=api_key, **options))
            wrapped = BlockingAsync(async_client, portal)
            stack.callback(wrapped.close)
            return cast(VelaClient, wrapped)

        yield make


@pytest.fixture
def client(make_client: ClientFactory) -> VelaClient:
    return make_client()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Collection names no other test uses (the server lives for the whole package)."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:10]}"
