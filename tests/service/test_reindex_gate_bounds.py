"""An inline gate's judged set is bounded as search queries are: each query at most 10,000 characters, all of them
2,000,000, and the judgements per query and in all. Each refusal is a 422 in the error shape naming the field,
before any job is queued."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import service.reindex_schemas
from service.reindex_schemas import MAX_GATE_ID_LENGTH, MAX_GATE_JUDGEMENTS_PER_QUERY, MAX_GATE_QUERY_CHARS
from tests.service.conftest import error_body


def _reindex(client: httpx.Client, queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> httpx.Response:
    gate = {"queries": queries, "qrels": qrels, "mode": "hybrid"}
    return client.post("/collections/c/reindex", json={"embedder": "default", "gate": gate})


def _refused(r: httpx.Response, field: str) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    err = error_body(r)
    assert err["code"] == "invalid_request"
    assert err["message"].startswith(field), err["message"]
    assert err["details"] and err["details"][0]["msg"].startswith(field)
    return err


def test_a_gate_query_longer_than_a_search_query_is_refused(server: httpx.Client) -> None:
    err = _refused(_reindex(server, {"q1": "x " * 5_001}, {"q1": {"a": 1}}), "gate.queries.q1")
    assert "10000 characters" in err["message"]
    assert "x x x" not in err["message"]  # the query is not echoed


def test_gate_queries_past_the_total_characters_are_refused(server: httpx.Client) -> None:
    n = MAX_GATE_QUERY_CHARS // 10_000 + 1
    queries = {f"q{i}": "word " * 2_000 for i in range(n)}  # each within a search query's 10,000 characters
    err = _refused(_reindex(server, queries, {"q0": {"a": 1}}), "gate: queries:")
    assert f"the limit is {MAX_GATE_QUERY_CHARS}" in err["message"]


def test_gate_judgements_past_their_bounds_are_refused(server: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    many = {f"d{i}": 1 for i in range(MAX_GATE_JUDGEMENTS_PER_QUERY + 1)}
    err = _refused(_reindex(server, {"q1": "tides"}, {"q1": many}), "gate.qrels.q1")
    assert str(MAX_GATE_JUDGEMENTS_PER_QUERY) in err["message"]
    # The total, lowered in this (the server's) process: 500,000 judgements would make a 10 MB body.
    monkeypatch.setattr(service.reindex_schemas, "MAX_GATE_JUDGEMENTS", 20_000)
    qrels = {f"q{j}": {f"d{i}": 1 for i in range(5_000)} for j in range(5)}
    err = _refused(_reindex(server, {"q0": "tides"}, qrels), "gate: qrels:")
    assert "25000 judgements; the limit is 20000" in err["message"]


def test_gate_ids_are_bounded(server: httpx.Client) -> None:
    long_id = "q" * (MAX_GATE_ID_LENGTH + 1)
    _refused(_reindex(server, {long_id: "tides"}, {"q1": {"a": 1}}), "gate.queries")
    _refused(_reindex(server, {"q1": "tides"}, {"q1": {long_id: 1}}), "gate.qrels.q1")


def test_a_gate_within_the_bounds_is_not_refused_by_them(server: httpx.Client) -> None:
    r = _reindex(server, {"q1": "x" * 10_000}, {"q1": {"a": 1}})
    assert r.status_code != 422 or "gate" not in r.json()["error"]["message"], r.text
