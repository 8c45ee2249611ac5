"""`collection_exists` and `document_exists` through both clients against a real server: a HEAD request, True on
200 and False on 404, any other failure raised as the GET's would be."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from vela_client import Unauthorized, VelaClient
from vela_client.routes import HEAD_ROUTES

from tests.client.conftest import API_KEY, ClientFactory


@pytest.fixture(scope="module")
def stored(vela_url: str) -> str:
    """A collection holding a document whose id needs escaping in a path."""
    name = f"exists-{id(vela_url):x}"
    with VelaClient(vela_url, api_key=API_KEY) as vela:
        docs = [{"id": "a", "text": "otters"}, {"id": "dir/b?c#d", "text": "rivers"}, {"id": "..", "text": "dots"}]
        vela.index(name, docs, wait=True)
    return name


def test_collection_exists(client: VelaClient, stored: str, unique: Callable[[str], str]) -> None:
    assert client.collection_exists(stored) is True
    assert client.collection_exists(unique("missing")) is False
    alias = unique("exists-alias")
    client.set_alias(alias, stored)
    try:
        assert client.collection_exists(alias) is True  # as GET /collections/{alias} finds it
    finally:
        client.delete_alias(alias)


def test_document_exists(client: VelaClient, stored: str, unique: Callable[[str], str]) -> None:
    assert client.document_exists(stored, "a") is True
    assert client.document_exists(stored, "dir/b?c#d") is True and client.document_exists(stored, "..") is True
    assert client.document_exists(stored, "nope") is False
    assert client.document_exists(unique("missing"), "a") is False  # a HEAD's 404 does not say what is missing
    with pytest.raises(ValueError):
        client.document_exists(stored, "")


def test_exists_raises_other_failures(make_client: ClientFactory, stored: str) -> None:
    keyless = make_client(api_key=None)
    with pytest.raises(Unauthorized):
        keyless.collection_exists(stored)
    with pytest.raises(Unauthorized):
        keyless.document_exists(stored, "a")


def test_exists_sends_head_requests(make_client: ClientFactory, flavor: str, stored: str) -> None:
    methods: list[str] = []

    def record(request: httpx.Request) -> None:
        methods.append(request.method)

    async def record_async(request: httpx.Request) -> None:
        record(request)

    client = make_client(http_options={"event_hooks": {"request": [record_async if flavor == "async" else record]}})
    client.collection_exists(stored)
    client.document_exists(stored, "a")
    assert methods == ["HEAD", "HEAD"] and {route.method for route in HEAD_ROUTES} == {"HEAD"}
