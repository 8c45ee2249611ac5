"""`highlight` through real HTTP: each hit carries the spans of its passage text that match a query term as BM25
matches them (case, stopwords and stems), in every mode and in batches; without it, `highlights` is null; the
response-size estimate still bounds the body."""

from __future__ import annotations

import httpx
import pytest

from tests.service.conftest import wait_job

DOCS = [
    {"id": "t1", "text": "The Moon's pull raises TIDES; tidal ranges vary along the coast."},
    {"id": "t2", "text": "Harbours and the moon: spring tides follow a full moon."},
    {"id": "b1", "text": "Bread rises in a warm oven."},
]


@pytest.fixture(scope="module")
def tides(server: httpx.Client) -> str:
    r = server.post("/index", json={"collection": "highlights", "documents": DOCS})
    assert r.status_code == 202 and wait_job(server, r.json()["job_id"])["status"] == "succeeded"
    return "highlights"


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_hits_carry_the_spans_of_the_query_terms(server: httpx.Client, tides: str, mode: str) -> None:
    body = {"collection": tides, "query": "the moon and tides", "mode": mode, "k": 3, "highlight": True}
    r = server.post("/search", json=body)
    assert r.status_code == 200, r.text
    for hit in r.json()["hits"]:
        words = [hit["text"][s:e] for s, e in hit["highlights"]]
        expected = {"t1": ["Moon", "TIDES"], "t2": ["moon", "tides", "moon"], "b1": []}[hit["id"]]
        assert words == expected, (hit["id"], words)  # "The", "and" are stopwords; "tidal" stems apart
    plain = server.post("/search", json={**body, "highlight": False}).json()["hits"]
    assert all(h["highlights"] is None for h in plain)


def test_batch_highlights_each_query_with_its_own_terms(server: httpx.Client, tides: str) -> None:
    body = {"collection": tides, "queries": ["bread oven", "harbours"], "mode": "bm25", "k": 1, "highlight": True}
    results = server.post("/search/batch", json=body).json()["results"]
    got = [[h["text"][s:e] for s, e in h["highlights"]] for r in results for h in r["hits"]]
    assert got == [["Bread", "oven"], ["Harbours"]]
