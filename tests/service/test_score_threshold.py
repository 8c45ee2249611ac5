"""`score_threshold` through real HTTP: a search leaves out the hits scoring below it, in every mode, on pages
(`offset`), in batches and with passages; the hits kept are the unthresholded search's, unchanged."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.service.conftest import wait_job

DOCS = [
    {"id": f"d{i}", "text": f"tides and the moon {'moon ' * (i % 4)} note {i} about harbours and boats"}
    for i in range(12)
]


@pytest.fixture(scope="module")
def tides(server: httpx.Client) -> str:
    r = server.post("/index", json={"collection": "thresholds", "documents": DOCS})
    assert r.status_code == 202 and wait_job(server, r.json()["job_id"])["status"] == "succeeded"
    return "thresholds"


def _hits(server: httpx.Client, body: dict[str, Any]) -> list[tuple[str, float]]:
    r = server.post("/search", json=body)
    assert r.status_code == 200, r.text
    return [(h["id"], h["score"]) for h in r.json()["hits"]]


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
@pytest.mark.parametrize("group_by_doc", [True, False])
def test_threshold_keeps_the_hits_at_or_above_it(
    server: httpx.Client, tides: str, mode: str, group_by_doc: bool
) -> None:
    base = {"collection": tides, "query": "moon tides", "mode": mode, "k": 12, "group_by_doc": group_by_doc}
    if mode == "hybrid":
        base["fusion"] = {"method": "convex", "alpha": 0.5, "normalization": "minmax"}
    every = _hits(server, base)
    assert len(every) >= 6
    cut = every[4][1]  # the fifth hit's score: it and those tied with it stay
    kept = _hits(server, {**base, "score_threshold": cut})
    assert kept == [h for h in every if h[1] >= cut] and len(kept) >= 5
    assert _hits(server, {**base, "score_threshold": every[0][1] + 1.0}) == []
    page = _hits(server, {**base, "score_threshold": cut, "offset": 2, "k": 2})
    assert page == kept[2:4]


def test_batch_search_thresholds_each_query(server: httpx.Client, tides: str) -> None:
    body = {"collection": tides, "queries": ["moon", "harbours boats"], "mode": "bm25", "k": 12}
    every = server.post("/search/batch", json=body).json()["results"]
    cut = every[0]["hits"][2]["score"]
    got = server.post("/search/batch", json={**body, "score_threshold": cut}).json()["results"]
    for full, part in zip(every, got, strict=True):
        assert [h["id"] for h in part["hits"]] == [h["id"] for h in full["hits"] if h["score"] >= cut]


@pytest.mark.parametrize("value", ["high", [1], True])
def test_a_threshold_that_is_not_a_number_is_refused(server: httpx.Client, tides: str, value: Any) -> None:
    r = server.post("/search", json={"collection": tides, "query": "moon", "score_threshold": value})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
