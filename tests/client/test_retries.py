"""Retries through both clients against a tiny scripted HTTP server: 503s and connection errors are retried with
backoff, `Retry-After` is honoured, attempts are bounded, and what is not safe to send again is not sent again."""

from __future__ import annotations

import logging
import socket

import pytest
from vela_client import ConnectionFailed, RetryPolicy, ServerError, Unavailable

from tests.client.conftest import FAST_RETRY, ClientFactory
from tests.client.scripted_server import Answer, scripted_server, vela_error

HEALTHY = Answer(200, {"status": "ok"})
JOB = {
    "id": "j1",
    "collection": "c",
    "kind": "upsert",
    "status": "queued",
    "done": 0,
    "total": 1,
    "created_at": 1.0,
}


def _delays(caplog: pytest.LogCaptureFixture) -> list[float]:
    return [float(r.vela_delay_s) for r in caplog.records if r.name == "vela_client" and hasattr(r, "vela_delay_s")]


def test_503_twice_then_200_succeeds_honouring_retry_after(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vela_client")
    policy = RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.02, max_retry_after_s=0.05)
    answers = (
        vela_error(503, "unavailable", "busy", **{"Retry-After": "3600"}),  # honoured, up to max_retry_after_s
        vela_error(503, "unavailable", "busy", **{"Retry-After": "0"}),
        HEALTHY,
    )
    with scripted_server(*answers) as script:
        assert make_client(script.url, retry=policy).health().status == "ok"
    assert [m for m, _, _ in script.seen] == ["GET"] * 3
    assert _delays(caplog) == [0.05, 0.0]


def test_backoff_without_retry_after_grows_within_bounds(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vela_client")
    policy = RetryPolicy(attempts=4, backoff_s=0.01, max_backoff_s=0.03)
    with scripted_server(Answer(503, "overloaded"), Answer(503, "overloaded"), Answer(503, "overloaded"), HEALTHY) as s:
        make_client(s.url, retry=policy).health()
    first, second, third = _delays(caplog)
    assert 0.005 <= first <= 0.01 and 0.01 <= second <= 0.02 and 0.015 <= third <= 0.03  # jitter: half to all


def test_attempts_are_bounded_and_the_last_error_is_raised(make_client: ClientFactory) -> None:
    with scripted_server(vela_error(503, "unavailable", "still busy")) as script:
        client = make_client(script.url, retry=FAST_RETRY)
        with pytest.raises(Unavailable) as err:
            client.search("c", "q")
    assert len(script.seen) == FAST_RETRY.attempts
    assert (err.value.status, err.value.code, err.value.message) == (503, "unavailable", "still busy")


def test_a_request_past_the_server_deadline_is_not_retried(make_client: ClientFactory) -> None:
    answer = vela_error(503, "timeout", "the request took longer than 60 s")
    with scripted_server(answer) as script, pytest.raises(Unavailable) as err:
        make_client(script.url, retry=FAST_RETRY).search("c", "q")
    assert err.value.code == "timeout" and len(script.seen) == 1


def test_other_errors_are_not_retried(make_client: ClientFactory) -> None:
    with (
        scripted_server(Answer(500, {"error": {"code": "internal", "message": "bug"}})) as script,
        pytest.raises(ServerError) as err,
    ):
        make_client(script.url, retry=FAST_RETRY).health()
    assert (err.value.status, err.value.code) == (500, "internal") and len(script.seen) == 1


def test_retries_off(make_client: ClientFactory) -> None:
    with scripted_server(Answer(503, "busy"), HEALTHY) as script, pytest.raises(Unavailable):
        make_client(script.url, retry=RetryPolicy(attempts=1)).health()
    assert len(script.seen) == 1


def test_refused_connections_are_retried_then_raised(make_client: ClientFactory) -> None:
    with socket.socket() as bound:  # bound, never listening: every connection is refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"
        with pytest.raises(ConnectionFailed) as err:
            make_client(url, retry=FAST_RETRY).get_job("j1")
    assert err.value.status is None and err.value.code == "connection_failed" and "ConnectError" in err.value.message


def test_a_dropped_connection_is_retried_only_where_sending_twice_is_safe(make_client: ClientFactory) -> None:
    with scripted_server(Answer(0), Answer(200, JOB)) as script:
        assert make_client(script.url, retry=FAST_RETRY).get_job("j1").id == "j1"
    assert len(script.seen) == 2
    # A retry of a failed job, resent after the server may have acted on it, would answer 409 though it worked.
    with scripted_server(Answer(0), Answer(202, JOB)) as script, pytest.raises(ConnectionFailed):
        make_client(script.url, retry=FAST_RETRY).retry_job("j1")
    assert len(script.seen) == 1


def test_a_dropped_delete_of_many_documents_is_sent_again(make_client: ClientFactory) -> None:
    # Like POST /index: sent twice, the second job finds the documents gone, and the same documents are left.
    accepted = {"job_id": "j1", "status": "queued", "url": "http://vela/jobs/j1"}
    for kwargs in ({"ids": ["a", "b"]}, {"filter": {"must": [{"key": "n", "match": {"value": 1}}]}}):
        with scripted_server(Answer(0), Answer(202, accepted)) as script:
            assert make_client(script.url, retry=FAST_RETRY).delete_documents("c", **kwargs).job_id == "j1"
        assert [(m, p) for m, p, _ in script.seen] == [("POST", "/collections/c/delete")] * 2


def test_key_and_user_agent_are_sent(make_client: ClientFactory) -> None:
    with scripted_server(HEALTHY) as script:
        make_client(script.url, api_key="k-1", headers={"X-Request-ID": "trace-7"}).health()
    (_, path, headers), *_ = script.seen
    assert path == "/healthz" and headers["authorization"] == "Bearer k-1" and headers["x-request-id"] == "trace-7"
    assert headers["user-agent"].startswith("vela-client/")


def test_a_base_url_path_prefix_is_kept(make_client: ClientFactory) -> None:
    with scripted_server(Answer(200, JOB)) as script:
        make_client(f"{script.url}/vela", retry=FAST_RETRY).get_job("a/b")
    assert [path for _, path, _ in script.seen] == ["/vela/jobs/a%2Fb"]
