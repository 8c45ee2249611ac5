"""Health, readiness and metrics, and the API key: every resource route refuses a client without one (401)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from vela_client import (
    AsyncVelaClient,
    ConnectionFailed,
    Forbidden,
    Health,
    Readiness,
    Unauthorized,
    Unavailable,
    VelaClient,
)

from tests.client.conftest import API_KEY, FAST_RETRY, ClientFactory
from tests.client.scripted_server import Answer, scripted_server, vela_error


def test_health_and_ready(client: VelaClient, vela_url: str) -> None:
    health = client.health()
    assert isinstance(health, Health) and health.status == "ok"
    ready = client.ready()
    assert isinstance(ready, Readiness) and ready.status == "ready" and ready.embedders >= 1
    assert ready.queue == "ok"
    # Every field of the probe's answer is a typed field of the model, not an extra one.
    assert set(httpx.get(f"{vela_url}/readyz").json()) == set(Readiness.model_fields) and not ready.model_extra


def test_metrics_is_prometheus_text(client: VelaClient) -> None:
    client.health()
    text = client.metrics()
    assert "# TYPE vela_http_requests_total counter" in text
    assert 'vela_http_requests_total{method="GET",route="/healthz",status="200"}' in text


def test_ready_while_stopping_raises_at_once(make_client: ClientFactory) -> None:
    answer = vela_error(503, "not_ready", "not serving: the process is stopping")
    with scripted_server(answer) as script, pytest.raises(Unavailable) as err:
        make_client(script.url).ready()
    assert (err.value.status, err.value.code) == (503, "not_ready") and err.value.request_id == "scripted-1"
    assert len(script.seen) == 1  # a probe answers now: not retried


def test_health_of_a_server_that_stays_unavailable(make_client: ClientFactory) -> None:
    with scripted_server(Answer(503, "Service Unavailable")) as script, pytest.raises(Unavailable) as err:
        make_client(script.url, retry=FAST_RETRY).health()
    assert err.value.code == "unavailable" and err.value.message == "Service Unavailable"
    assert len(script.seen) == FAST_RETRY.attempts


# Every route that needs a key, called with harmless arguments.
PROTECTED: list[tuple[str, Callable[[VelaClient], Any]]] = [
    ("metrics", lambda c: c.metrics()),
    ("list_collections", lambda c: c.list_collections()),
    ("get_collection", lambda c: c.get_collection("x")),
    ("delete_collection", lambda c: c.delete_collection("x")),
    ("delete_document", lambda c: c.delete_document("x", "d")),
    ("delete_documents", lambda c: c.delete_documents("x", ids=["d"])),
    ("index", lambda c: c.index("x", [{"id": "a", "text": "t"}])),
    ("search", lambda c: c.search("x", "q")),
    ("search_batch", lambda c: c.search_batch("x", ["q"])),
    ("get_job", lambda c: c.get_job("j")),
    ("cancel_job", lambda c: c.cancel_job("j")),
    ("retry_job", lambda c: c.retry_job("j")),
]


@pytest.mark.parametrize("call", [c for _, c in PROTECTED], ids=[n for n, _ in PROTECTED])
def test_without_a_key_every_resource_route_is_unauthorized(
    make_client: ClientFactory, call: Callable[[VelaClient], Any]
) -> None:
    for key in ("", "wrong-key"):
        with pytest.raises(Unauthorized) as err:
            call(make_client(api_key=key))
        assert (err.value.status, err.value.code) == (401, "unauthorized")
        assert ("missing" if key == "" else "invalid") in err.value.message


def test_probes_need_no_key(make_client: ClientFactory) -> None:
    keyless = make_client(api_key="")
    assert keyless.health().status == "ok" and keyless.ready().status == "ready"


def test_key_from_the_environment(make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VELA_API_KEY", API_KEY)
    assert isinstance(make_client(api_key=None).list_collections(), list)


def test_a_read_only_key_on_a_write_raises_forbidden(make_client: ClientFactory) -> None:
    """The server's 403 for a read-only key (VELA_READ_API_KEYS) on a write: its own class, not retried."""
    answer = vela_error(403, "forbidden", "this API key may only read")
    with scripted_server(answer) as script, pytest.raises(Forbidden) as err:
        make_client(script.url, retry=FAST_RETRY).index("x", [{"id": "a", "text": "t"}])
    assert (err.value.status, err.value.code) == (403, "forbidden") and len(script.seen) == 1


def test_ready_from_a_server_not_answering_yet_fails_at_once(make_client: ClientFactory) -> None:
    """A starting server does not answer: the probe's connection is refused, and not retried. The docstrings say
    so, and say that only a stopping process answers 503."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections to it are refused
        with pytest.raises(ConnectionFailed):
            make_client(f"http://127.0.0.1:{port}", retry=FAST_RETRY).ready()
    for method in (VelaClient.ready, AsyncVelaClient.ready):
        doc = " ".join((method.__doc__ or "").split())
        assert (
            "stopping answers 503" in doc and "does not answer at all" in doc and "while the server starts" not in doc
        )
