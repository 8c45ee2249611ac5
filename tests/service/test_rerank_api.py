"""/search with `rerank` through real HTTP: reordering, the default reranker, bad input, timeouts, failures."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from models.registry import ModelRegistry
from models.reranker import CrossEncoder
from tests.reranker_fixtures import make_reranker
from tests.service.conftest import running_server, wait_job

DOCS = [
    {"id": "berlin", "title": "Berlin", "text": "Berlin is the capital of Germany and has 3.7 million inhabitants."},
    {"id": "paris", "title": "Paris", "text": "Paris is the capital and largest city of France."},
    {"id": "rome", "title": "Rome", "text": "Rome is the capital city of Italy."},
    {"id": "madrid", "title": "Madrid", "text": "Madrid is the capital and most populous city of Spain."},
    {"id": "cat", "title": "Cats", "text": "The domestic cat is a small carnivorous mammal kept as a pet."},
]
QUERY = {"collection": "cities", "query": "capital city", "k": 5}


@pytest.fixture(scope="module")
def reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_reranker("bert", tmp_path_factory.mktemp("rr") / "bert")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, reranker: Path) -> Iterator[httpx.Client]:
    # The default reranker is loaded in the lifespan; requests may also name one, by registry name.
    data_dir = tmp_path_factory.mktemp("vela")
    ModelRegistry(data_dir / "models").register("rr", reranker)
    with running_server(data_dir, reranker=str(reranker), rerank_batch_size=2) as c:
        r = c.post("/index", json={"collection": "cities", "documents": DOCS})
        assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        yield c


def _search(client: httpx.Client, **body: Any) -> dict[str, Any]:
    r = client.post("/search", json={**QUERY, **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _metric(client: httpx.Client, status: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'vela_rerank_queries_total{{status="{status}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_rerank_orders_hits_by_the_cross_encoder(client: httpx.Client, reranker: Path) -> None:
    plain = _search(client)
    assert plain["rerank"] is None and all(h["rerank_score"] is None for h in plain["hits"])
    body = _search(client, rerank={"model": "rr", "top_n": 5})
    info = body["rerank"]
    assert info["status"] == "ok" and info["error"] is None and info["model"] == "rr"
    assert info["top_n"] == 5 and info["scored"] == len(body["hits"]) == 5 and info["took_ms"] > 0
    scores = [h["rerank_score"] for h in body["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert sorted(h["id"] for h in body["hits"]) == sorted(h["id"] for h in plain["hits"])
    assert body["took_ms"] >= info["took_ms"]


def test_a_weight_below_one_blends_with_the_fused_order(client: httpx.Client) -> None:
    plain = [h["id"] for h in _search(client)["hits"]]
    kept = _search(client, rerank={"top_n": 5, "weight": 0.0})
    assert [h["id"] for h in kept["hits"]] == plain and kept["rerank"]["weight"] == 0.0
    assert all(h["rerank_score"] is not None for h in kept["hits"])  # scored, then outvoted by the fused order
    assert _search(client, rerank={"top_n": 5})["rerank"]["weight"] == 1.0  # the server's VELA_RERANK_WEIGHT


def test_top_n_beyond_k_reranks_more_than_it_returns(client: httpx.Client) -> None:
    full = _search(client, rerank={"top_n": 5})["hits"]
    two = _search(client, k=2, rerank={"top_n": 5})["hits"]
    assert [h["id"] for h in two] == [h["id"] for h in full[:2]]


def test_hits_past_top_n_keep_the_fused_order(client: httpx.Client) -> None:
    fused = [h["id"] for h in _search(client)["hits"]]
    body = _search(client, rerank={"top_n": 2})
    ids = [h["id"] for h in body["hits"]]
    assert sorted(ids[:2]) == sorted(fused[:2]) and ids[2:] == fused[2:]
    assert body["rerank"]["scored"] == 2 and body["hits"][2]["rerank_score"] is None


def test_reranked_scores_match_the_model(client: httpx.Client, reranker: Path) -> None:
    from models.reranker import document_text, load_reranker

    body = _search(client, rerank={})  # the server's default reranker
    # Named as clients name models, never by its folder on the server: this one is outside the registry.
    assert body["rerank"]["model"] == "unregistered" and str(reranker) not in json.dumps(body)
    encoder = load_reranker(reranker)
    expected = encoder.score("capital city", [document_text(h["title"], h["text"]) for h in body["hits"]])
    np.testing.assert_allclose([h["rerank_score"] for h in body["hits"]], expected, rtol=1e-4, atol=1e-5)


def test_batch_search_reranks_every_query(client: httpx.Client) -> None:
    r = client.post(
        "/search/batch", json={"collection": "cities", "queries": ["capital city", "pets"], "rerank": {"top_n": 3}}
    )
    assert r.status_code == 200, r.text
    for result in r.json()["results"]:
        assert result["rerank"]["status"] == "ok" and result["rerank"]["scored"] == 3


@pytest.mark.parametrize(
    ("rerank", "code", "needle"),
    [
        ({"top_n": 0}, "invalid_request", "rerank.top_n: Input should be greater than or equal to 1"),
        ({"top_n": 1001}, "invalid_request", "rerank.top_n: Input should be less than or equal to 1000"),
        ({"max_ms": 0}, "invalid_request", "rerank.max_ms: Input should be greater than 0"),
        ({"model": ""}, "invalid_request", "rerank.model: String should have at least 1 character"),
        ({"topn": 5}, "invalid_request", "rerank.topn: Extra inputs are not permitted"),
        ({"weight": 1.5}, "invalid_request", "rerank.weight: Input should be less than or equal to 1"),
        ({"model": "/no/such/reranker"}, "unknown_model", "rerank.model: no registered model of that name"),
    ],
)
def test_bad_rerank_input_is_422_with_a_stable_message(
    client: httpx.Client, rerank: dict[str, Any], code: str, needle: str
) -> None:
    r = client.post("/search", json={**QUERY, "rerank": rerank})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == code and needle in err["message"]


def test_a_model_that_is_not_a_reranker_is_422(client: httpx.Client) -> None:
    r = client.post("/search", json={**QUERY, "rerank": {"model": "default"}})  # the built-in embedder
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_model" and "not a reranker" in r.json()["error"]["message"]


def test_timeout_returns_the_fused_order_and_says_so(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    fused = _search(client)["hits"]
    before = _metric(client, "timeout")
    original = CrossEncoder._forward

    def slow(self: CrossEncoder, queries: list[str], documents: list[str]) -> np.ndarray:
        time.sleep(0.15)
        return original(self, queries, documents)  # type: ignore[no-any-return]

    monkeypatch.setattr(CrossEncoder, "_forward", slow)
    body = _search(client, rerank={"top_n": 5, "max_ms": 100})
    assert body["rerank"]["status"] == "timeout" and "100 ms" in body["rerank"]["error"]
    assert body["rerank"]["scored"] < 5
    assert [(h["id"], h["score"]) for h in body["hits"]] == [(h["id"], h["score"]) for h in fused]
    assert all(h["rerank_score"] is None for h in body["hits"])
    assert _metric(client, "timeout") == before + 1


def test_failure_is_in_the_response_and_the_metrics(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    fused = _search(client)["hits"]
    before = _metric(client, "error")

    def broken(self: CrossEncoder, queries: list[str], documents: list[str]) -> np.ndarray:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(CrossEncoder, "_forward", broken)
    body = _search(client, rerank={"top_n": 5})
    assert body["rerank"]["status"] == "error"
    assert body["rerank"]["error"] == "reranker failed: RuntimeError: out of memory"
    assert [h["id"] for h in body["hits"]] == [h["id"] for h in fused]
    assert _metric(client, "error") == before + 1
    assert _metric(client, "ok") >= 1


def test_pairs_and_time_are_by_outcome_too(client: httpx.Client) -> None:
    """The three rerank metrics share the `status` label: per outcome, one duration per query reranked."""
    body = _search(client, rerank={"top_n": 5})
    assert body["rerank"]["status"] == "ok"
    samples = {
        (s.name, s.labels.get("status")): s.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for s in family.samples
        if s.name.startswith("vela_rerank_")
    }
    statuses = {status for name, status in samples if name == "vela_rerank_queries_total"}
    assert "ok" in statuses
    for status in statuses:
        queries = samples[("vela_rerank_queries_total", status)]
        assert samples[("vela_rerank_duration_seconds_count", status)] == queries
        assert ("vela_rerank_pairs_total", status) in samples
    assert samples[("vela_rerank_pairs_total", "ok")] >= 5  # this query's five pairs at least
