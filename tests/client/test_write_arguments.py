"""Every write method, in both clients, checks its waiting arguments before it sends anything: a bad one raises
ValueError and the real server has seen no request and holds what it held before. So does `delete_documents` with
its own rule, exactly one of ids and filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from vela_client import NotFound, VelaClient

from tests.client.conftest import API_KEY

# Waiting options that cannot apply: without wait=True, or a timeout that is not a number of seconds.
BAD: list[dict[str, Any]] = [
    {"on_progress": print},
    {"timeout": 1.0},
    {"on_progress": print, "timeout": 1.0},
    {"wait": True, "timeout": -1},
    {"wait": True, "timeout": float("nan")},
]

Write = Callable[[VelaClient, str, dict[str, Any]], object]
WRITES: dict[str, Write] = {
    "index": lambda c, name, bad: c.index(name, [{"id": "late1", "text": "late otters"}], **bad),
    "delete_document": lambda c, name, bad: c.delete_document(name, "d0", **bad),
    "patch_document": lambda c, name, bad: c.patch_document(name, "d0", {"n": 99}, mode="replace", **bad),
    "delete_documents": lambda c, name, bad: c.delete_documents(name, ids=["d0", "d1"], **bad),
    "set_schema": lambda c, name, bad: c.set_schema(name, {"n": "keyword"}, strict=True, **bad),
    "reindex": lambda c, name, bad: c.reindex(name, "default", **bad),
    "promote": lambda c, name, bad: c.promote(name, **bad),
    "rollback": lambda c, name, bad: c.rollback(name, **bad),
}


@pytest.fixture(scope="module")
def settled(vela_url: str) -> str:
    """A collection no write of these tests may change (made once, with a plain client)."""
    name = "settled-writes"
    with VelaClient(vela_url, api_key=API_KEY) as vela:
        vela.index(name, [{"id": f"d{i}", "text": f"note {i}", "metadata": {"n": i}} for i in range(3)], wait=True)
    return name


def writes_seen(client: VelaClient) -> int:
    """Requests other than GETs the server has answered, by its own request counter (GET /metrics)."""
    total = 0.0
    for line in client.metrics().splitlines():
        if line.startswith("vela_http_requests_total{") and 'method="GET"' not in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def state(client: VelaClient, name: str) -> dict[str, Any]:
    """What a write would change: the collection (counts, schema, generations) and its documents."""
    documents = {d.id: d.metadata for d in client.scroll_documents(name).documents}
    return {"collection": client.get_collection(name).model_dump(), "documents": documents}


@pytest.mark.parametrize("method", sorted(WRITES))
def test_a_bad_waiting_argument_sends_nothing(client: VelaClient, settled: str, method: str) -> None:
    before, seen = state(client, settled), writes_seen(client)
    for bad in BAD:
        with pytest.raises(ValueError, match="only with wait=True|timeout must be"):
            WRITES[method](client, settled, bad)
    assert writes_seen(client) == seen, "a request was sent"
    assert state(client, settled) == before
    with pytest.raises(NotFound):
        client.get_document(settled, "late1")


# Neither or both of ids and filter, with any waiting options: refused before the waiting options are looked at.
NOT_ONE_OF: list[dict[str, Any]] = [
    {},
    {"wait": True},
    {"ids": ["d0"], "filter": {"must": [{"key": "n", "match": {"value": 0}}]}},
    {"ids": ["d0"], "filter": {}, "wait": True, "on_progress": print},
    {"ids": [], "filter": {}},
    {"ids": None, "filter": None, "timeout": 1.0},
]


def test_delete_documents_needs_exactly_one_of_ids_and_filter(client: VelaClient, settled: str) -> None:
    before, seen = state(client, settled), writes_seen(client)
    for arguments in NOT_ONE_OF:
        with pytest.raises(ValueError, match="exactly one of ids and filter"):
            client.delete_documents(settled, **arguments)
    with pytest.raises(TypeError, match="not one string"):
        client.delete_documents(settled, ids="d0", wait=True)
    assert writes_seen(client) == seen, "a request was sent"
    assert state(client, settled) == before


def test_a_bad_waiting_argument_creates_no_collection(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("never")
    for bad in BAD:
        with pytest.raises(ValueError):
            client.index(name, [{"id": "a", "text": "x"}], schema={"n": "integer"}, **bad)
    with pytest.raises(ValueError, match="strict applies only with a schema"):
        client.index(name, [{"id": "a", "text": "x"}], strict=True)
    with pytest.raises(NotFound):
        client.get_collection(name)


def test_documents_that_are_not_a_list_of_documents_send_nothing(
    client: VelaClient, unique: Callable[[str], str]
) -> None:
    name = unique("never")
    for documents, needle in (("abc", "not one str"), ({"id": "a", "text": "x"}, "not one dict"), ([42], "not int")):
        with pytest.raises(TypeError, match=needle):
            client.index(name, documents)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        client.get_collection(name)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "5", True])
def test_a_timeout_that_is_no_number_of_seconds_is_refused_at_once(vela_url: str, timeout: Any) -> None:
    from vela_client import AsyncVelaClient

    for make in (VelaClient, AsyncVelaClient):
        with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
            make(vela_url, api_key=API_KEY, timeout=timeout)


@pytest.mark.parametrize("url", ["localhost:8000", "127.0.0.1:8000", "ftp://host", "http://", "http://[::1"])
def test_an_address_that_is_no_http_url_is_refused_at_once(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`localhost:8000` alone would parse as scheme `localhost` and fail at the first call as if no server were
    there; it is a configuration error, said when the client is made, from the argument or VELA_URL."""
    from vela_client import AsyncVelaClient

    for make in (VelaClient, AsyncVelaClient):
        with pytest.raises(ValueError, match="base_url: .* is not"):
            make(url)
        monkeypatch.setenv("VELA_URL", url)
        with pytest.raises(ValueError, match="VELA_URL: .* is not"):
            make()
        monkeypatch.delenv("VELA_URL")
