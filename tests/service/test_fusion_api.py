"""Fusion through HTTP: the choice an ingest job makes is shown by GET /collections and used by default; a
request's own fusion overrides it; the collection chooses again once it has doubled."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.fusion_choice import MIN_DOCUMENTS
from tests.service.conftest import running_server, wait_job

WORDS = [f"{a}{b}" for a in ("river", "stone", "cloud", "ember", "frost", "meadow") for b in ("ash", "fen", "tor")]


def documents(start: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(start)
    return [
        {"id": f"d{i}", "text": ". ".join(" ".join(rng.sample(WORDS, 5)) for _ in range(4)) + "."}
        for i in range(start, start + n)
    ]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("fusion"), embedder=str(tiny_embedder_dir)) as c:
        r = c.post("/index", json={"collection": "fz", "documents": documents(0, MIN_DOCUMENTS + 10)})
        assert r.status_code == 202, r.text
        assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        wait_chosen(c, lambda chosen: chosen is not None)  # the choice runs in the background after the job
        yield c


def wait_chosen(client: httpx.Client, ready: Any, timeout: float = 60.0) -> dict[str, Any]:
    """The collection's stored choice, once `ready(choice)` holds (the choice is made after the job ends)."""
    deadline = time.monotonic() + timeout
    while True:
        chosen = client.get("/collections/fz").json()["fusion"].get("chosen")
        if ready(chosen) or time.monotonic() > deadline:
            return chosen  # type: ignore[no-any-return]
        time.sleep(0.1)


def search(client: httpx.Client, **options: Any) -> list[tuple[str, float]]:
    r = client.post("/search", json={"collection": "fz", "query": "riverash emberfen stonetor", "k": 8, **options})
    assert r.status_code == 200, r.text
    return [(h["id"], h["score"]) for h in r.json()["hits"]]


def same(a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float = 1e-5) -> bool:
    """The same ranking: scores equal up to float rounding (a run alone is scored in float32 by its retriever,
    in float64 when it comes through the fusion, and a min-max normalisation magnifies a last-bit difference
    by 1 / (max - min)), and the same documents in the same order, except that documents whose scores are
    that close may come in either order."""
    if len(a) != len(b) or any(abs(x - y) > tol * max(1.0, abs(x)) for (_, x), (_, y) in zip(a, b, strict=True)):
        return False
    start = 0
    for end in range(1, len(a) + 1):  # runs of near-equal scores: the same documents, in any order
        if end == len(a) or a[end - 1][1] - a[end][1] > tol * max(1.0, abs(a[end][1])):
            if {i for i, _ in a[start:end]} != {i for i, _ in b[start:end]}:
                return False
            start = end
    return True


def assert_same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    assert same(a, b), f"different rankings:\n{a}\n{b}"


def test_the_ingest_job_chose_a_fusion_and_get_collections_shows_it(client: httpx.Client) -> None:
    fusion = client.get("/collections/fz").json()["fusion"]
    assert fusion["method"] in ("rrf", "convex", "dense", "bm25")
    chosen = fusion["chosen"]
    assert chosen["documents"] == MIN_DOCUMENTS + 10 and chosen["pseudo_queries"] > 0
    assert set(chosen["ndcg@10"]) >= {"rrf", "dense", "bm25"}
    listed = {c["name"]: c for c in client.get("/collections").json()["collections"]}
    assert listed["fz"]["fusion"] == fusion


def test_auto_is_the_stored_choice_and_a_request_overrides_it(client: httpx.Client) -> None:
    stored = {k: v for k, v in client.get("/collections/fz").json()["fusion"].items() if k != "chosen"}
    assert_same(search(client), search(client, fusion={"method": "auto"}))
    assert_same(search(client), search(client, fusion=stored))
    assert_same(search(client, fusion={"method": "bm25"}), search(client, mode="bm25"))
    assert_same(search(client, fusion={"method": "dense"}), search(client, mode="dense"))
    rrf = search(client, fusion={"method": "rrf"})
    assert_same(rrf, search(client, weights={"dense": 1.0, "bm25": 1.0}))  # RRF weights and no fusion: RRF
    convex = search(client, fusion={"method": "convex", "alpha": 0.5, "normalization": "minmax"})
    assert all(0.0 <= s <= 1.0 for _, s in convex) and convex[0][1] > rrf[0][1]  # scores of another scale


@pytest.mark.parametrize(
    "fusion",
    [
        {"method": "auto", "alpha": 0.5},
        {"method": "convex", "alpha": 1.5},
        {"method": "convex", "normalization": "l2"},
        {"method": "sum"},
        {"method": "rrf", "extra": 1},
    ],
)
def test_a_malformed_fusion_is_refused(client: httpx.Client, fusion: dict[str, Any]) -> None:
    r = client.post("/search", json={"collection": "fz", "query": "riverash", "fusion": fusion})
    assert r.status_code == 422, r.text


def test_the_collection_chooses_again_once_it_has_doubled(client: httpx.Client) -> None:
    first = client.get("/collections/fz").json()["fusion"]["chosen"]
    r = client.post("/index", json={"collection": "fz", "documents": documents(1000, 10)})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    assert client.get("/collections/fz").json()["fusion"]["chosen"] == first  # 70 documents: not doubled
    r = client.post("/index", json={"collection": "fz", "documents": documents(2000, 60)})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    again = wait_chosen(client, lambda chosen: chosen != first)
    assert again["documents"] == 2 * (MIN_DOCUMENTS + 10) + 10 and again["at"] > first["at"]
