"""The retry policy and error mapping on their own: Retry-After forms, bounds, bodies that are not JSON, and the
calls the documentation says are not sent again."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest
from vela_client import (
    ClientClosed,
    InvalidRequest,
    PayloadTooLarge,
    RetryPolicy,
    ServerError,
    Unavailable,
    VelaClient,
    VelaError,
    routes,
)
from vela_client.errors import error_from_response
from vela_client.models import Job
from vela_client.retry import parse_retry_after
from vela_client.waiting import JobWatch

CLIENT_DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def test_retry_after_seconds_and_dates() -> None:
    assert parse_retry_after("3") == 3.0 and parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None and parse_retry_after("inf") is None  # floats, but no delay meant
    past = format_datetime(datetime(2000, 1, 1, tzinfo=UTC), usegmt=True)
    assert parse_retry_after(past) == 0.0
    future = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    later = parse_retry_after(future)
    assert later is not None and 3000 < later <= 3600


def test_policy_delays() -> None:
    policy = RetryPolicy(backoff_s=1.0, max_backoff_s=4.0, max_retry_after_s=10.0)
    assert policy.delay(1, "7") == 7.0 and policy.delay(1, "99") == 10.0
    assert 0.5 <= policy.delay(1) <= 1.0 and 2.0 <= policy.delay(3) <= 4.0 and 2.0 <= policy.delay(9) <= 4.0
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(backoff_s=-1)


def _response(status: int, **kw: object) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("GET", "http://vela/x"), **kw)  # type: ignore[arg-type]


def test_errors_from_bodies_of_every_kind() -> None:
    shaped = error_from_response(
        _response(422, json={"error": {"code": "invalid_request", "message": "k: too small", "details": [{}]}})
    )
    assert isinstance(shaped, InvalidRequest) and shaped.details == [{}] and shaped.message == "k: too small"
    plain = error_from_response(_response(503, text="Service Unavailable", headers={"X-Request-ID": "r9"}))
    assert isinstance(plain, Unavailable) and plain.code == "unavailable" and plain.request_id == "r9"
    empty = error_from_response(_response(502))
    assert isinstance(empty, ServerError) and empty.code == "error" and empty.message == "HTTP 502 Bad Gateway"
    teapot = error_from_response(_response(418, json=["not", "the", "shape"]))
    assert type(teapot) is VelaError and teapot.status == 418
    assert str(shaped) == "k: too small (HTTP 422, code invalid_request)"
    for status, code in ((414, "uri_too_long"), (431, "headers_too_large")):  # answered before any route
        head = error_from_response(_response(status, text="too long"))
        assert isinstance(head, PayloadTooLarge) and head.code == code


def test_a_closed_client_raises_a_vela_error_and_sends_nothing() -> None:
    sent: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(200, json={"status": "ok"}))
    with VelaClient("http://vela", http_options={"transport": transport}) as client:
        client.health()
    with pytest.raises(ClientClosed) as caught:
        client.health()
    assert isinstance(caught.value, VelaError) and isinstance(caught.value, RuntimeError)
    assert caught.value.code == "client_closed" and len(sent) == 1


def test_a_wait_polls_for_as_long_as_it_takes() -> None:
    """The first polls come quickly, then every poll_interval, however long the job runs (the doubling used to
    overflow after 1,024 polls: OverflowError, about 8.5 minutes into a wait)."""
    watch = JobWatch(timeout=None, poll_interval=0.5)
    job = Job.model_validate(
        {"id": "j", "collection": "c", "kind": "upsert", "status": "running", "done": 1, "total": 9, "created_at": 0}
    )
    delays = [watch.next_delay(job) for _ in range(5000)]
    assert delays[0] == 0.05 and delays[1] == 0.1 and set(delays[10:]) == {0.5}


def test_the_docs_list_every_call_not_sent_again_after_a_broken_connection() -> None:
    # Each such route's constant is its method's name in capitals (DELETE_ALIAS: delete_alias).
    declared = {n.lower() for n, r in vars(routes).items() if isinstance(r, routes.Route) and not r.idempotent}
    assert declared and all(hasattr(VelaClient, name) for name in declared)
    text = " ".join(CLIENT_DOC.read_text().split())
    bullet = text[text.index("after a connection broke mid-request") : text.index("Connections that could not")]
    assert set(re.findall(r"`(\w+)`", bullet)) == declared
