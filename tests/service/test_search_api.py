"""Ingest and search through real HTTP: every mode, passages and offsets, upserts, deletes, restarts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import running_server, wait_job

DOCS = [
    {"id": "berlin", "title": "Berlin", "text": "Berlin is the capital of Germany and has 3.7 million inhabitants."},
    {"id": "paris", "title": "Paris", "text": "Paris is the capital and largest city of France."},
    {"id": "cat", "title": "Cats", "text": "The domestic cat is a small carnivorous mammal kept as a pet."},
    {
        "id": "photo",
        "text": "Photosynthesis converts light energy into chemical energy in plants.",
        "metadata": {"y": 1},
    },
]


@pytest.fixture(scope="module")
def cities(server: httpx.Client) -> str:
    r = server.post("/index", json={"collection": "cities", "documents": DOCS})
    assert r.status_code == 202
    assert wait_job(server, r.json()["job_id"])["status"] == "succeeded"
    return "cities"


# bm25 mode searches no dense index: dim is refused there
@pytest.mark.parametrize(
    ("mode", "dims"),
    [
        ("dense", {"dim": "full"}),
        ("dense", {"dim": "256"}),
        ("bm25", {}),
        ("hybrid", {"dim": "full"}),
        ("hybrid", {"dim": "256"}),
    ],
)
def test_each_mode_finds_the_right_document(server: httpx.Client, cities: str, mode: str, dims: dict[str, str]) -> None:
    r = server.post("/search", json={"collection": cities, "query": "capital of France", "mode": mode, **dims})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["hits"][0]["id"] == "paris"
    hit = body["hits"][0]
    assert hit["title"] == "Paris" and "France" in hit["text"]
    assert set(hit["ranks"]) == {"dense", "bm25"}
    if mode == "hybrid":
        assert hit["ranks"]["dense"] == 1 and hit["ranks"]["bm25"] == 1
        assert hit["score"] == pytest.approx(2 / 61)
    assert body["took_ms"] >= 0


def test_dim_256_rescores_with_full_vectors_unless_asked_not_to(server: httpx.Client, cities: str) -> None:
    body = {"collection": cities, "query": "capital of France", "mode": "dense", "k": 4}
    full = server.post("/search", json=body).json()["hits"]
    rescored = server.post("/search", json={**body, "dim": "256"}).json()["hits"]
    raw = server.post("/search", json={**body, "dim": "256", "rescore": False}).json()["hits"]
    assert [(h["id"], round(h["score"], 5)) for h in rescored] == [(h["id"], round(h["score"], 5)) for h in full]
    assert raw[0]["id"] == "paris" and raw[0]["score"] != pytest.approx(full[0]["score"], abs=1e-6)


def test_metadata_and_k(server: httpx.Client, cities: str) -> None:
    r = server.post("/search", json={"collection": cities, "query": "plants light energy", "k": 2, "mode": "dense"})
    hits = r.json()["hits"]
    assert len(hits) == 2 and hits[0]["id"] == "photo" and hits[0]["metadata"] == {"y": 1}


def test_long_document_is_split_into_passages_with_offsets(server: httpx.Client, index_docs: Callable) -> None:
    filler = " ".join(f"Sentence number {i} talks about astronomy and telescopes." for i in range(120))
    text = filler + " The rare word zyzzyva appears only at the very end."
    index_docs("long", [{"id": "big", "text": text}, {"id": "small", "text": "Telescopes see far."}])
    info = server.get("/collections/long").json()
    assert info["documents"] == 2 and info["passages"] > 5
    r = server.post("/search", json={"collection": "long", "query": "zyzzyva", "mode": "bm25", "group_by_doc": False})
    hit = r.json()["hits"][0]
    assert hit["id"] == "big" and hit["passage"]["index"] > 0
    assert text[hit["passage"]["start"] : hit["passage"]["end"]] == hit["text"]
    assert "zyzzyva" in hit["text"]
    grouped = server.post("/search", json={"collection": "long", "query": "astronomy telescopes", "k": 10}).json()
    assert sorted(h["id"] for h in grouped["hits"]) == ["big", "small"]  # one hit per document
    ungrouped = server.post(
        "/search", json={"collection": "long", "query": "astronomy telescopes", "k": 10, "group_by_doc": False}
    ).json()
    assert len(ungrouped["hits"]) == info["passages"]  # every passage, fewer than k


def test_upsert_replaces_and_delete_removes(server: httpx.Client, index_docs: Callable) -> None:
    index_docs("upserts", [{"id": "a", "text": "apples are red"}, {"id": "b", "text": "bananas are yellow"}])
    index_docs("upserts", [{"id": "a", "text": "avocados are green"}])
    info = server.get("/collections/upserts").json()
    assert info["documents"] == 2
    hits = server.post("/search", json={"collection": "upserts", "query": "avocados", "mode": "bm25"}).json()["hits"]
    assert [h["id"] for h in hits] == ["a"] and hits[0]["text"] == "avocados are green"
    assert (
        server.post("/search", json={"collection": "upserts", "query": "apples", "mode": "bm25"}).json()["hits"] == []
    )

    r = server.delete("/collections/upserts/documents/b")
    assert r.status_code == 202 and wait_job(server, r.json()["job_id"])["status"] == "succeeded"
    assert server.get("/collections/upserts").json()["documents"] == 1
    assert (
        server.post("/search", json={"collection": "upserts", "query": "bananas", "mode": "bm25"}).json()["hits"] == []
    )

    assert server.delete("/collections/upserts").status_code == 204
    assert server.get("/collections/upserts").status_code == 404
    assert "upserts" not in [c["name"] for c in server.get("/collections").json()["collections"]]


def test_batch_search(server: httpx.Client, cities: str) -> None:
    r = server.post("/search/batch", json={"collection": cities, "queries": ["France", "cats as pets"], "k": 1})
    assert r.status_code == 200
    assert [res["hits"][0]["id"] for res in r.json()["results"]] == ["paris", "cat"]


def test_collection_info(server: httpx.Client, cities: str) -> None:
    info = server.get(f"/collections/{cities}").json()
    assert info["documents"] == 4 and info["dims"] == {"full": 384, "small": 256}
    assert info["index"]["bytes"] > 0 and info["index"]["bm25"]["method"] == "lucene"
    assert info["embedder"] == "default"  # the name clients use, never the model's folder on the server


def test_jobs_report_progress_and_cancel(server: httpx.Client) -> None:
    assert server.get("/jobs/nope").status_code == 404
    r = server.post(
        "/index", json={"collection": "cancel", "documents": [{"id": str(i), "text": f"doc {i}"} for i in range(3)]}
    )
    job_id = r.json()["job_id"]
    cancelled = server.delete(f"/jobs/{job_id}").json()
    final = wait_job(server, job_id)
    assert final["status"] in ("cancelled", "succeeded")  # it may have finished before the cancel arrived
    assert cancelled["id"] == job_id and cancelled["cancel_requested"] is True
    assert final["total"] == 3


def test_restart_returns_the_same_hits(tmp_path: Path) -> None:
    query = {"collection": "persist", "query": "capital of Germany", "mode": "hybrid", "k": 4}
    with running_server(tmp_path) as client:
        r = client.post("/index", json={"collection": "persist", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        before = client.post("/search", json=query).json()["hits"]
    with running_server(tmp_path) as client:
        after = client.post("/search", json=query).json()["hits"]
    assert [(h["id"], h["score"]) for h in after] == [(h["id"], h["score"]) for h in before]
    assert before[0]["id"] == "berlin"


def test_metrics_and_health(server: httpx.Client, cities: str) -> None:
    assert server.get("/healthz").json() == {"status": "ok"}
    assert server.get("/readyz").json()["status"] == "ready"
    server.post("/search", json={"collection": cities, "query": "x y", "mode": "bm25"})
    text = server.get("/metrics").text
    assert 'vela_http_requests_total{method="POST",route="/search",status="200"}' in text
    assert 'vela_search_duration_seconds_count{dim="none",mode="bm25"}' in text
    assert 'vela_index_passages{collection="cities"} 4.0' in text


def test_openapi_lists_the_routes(server: httpx.Client) -> None:
    paths = server.get("/openapi.json").json()["paths"]
    for p in ("/index", "/jobs/{job_id}", "/search", "/search/batch", "/collections", "/collections/{name}"):
        assert p in paths


@pytest.mark.parametrize("victim", ["dense-full.faiss", "bm25/rows.npy"])
def test_truncated_index_file_is_rebuilt_at_start_up(tmp_path: Path, victim: str) -> None:
    query = {"collection": "persist", "query": "capital of Germany", "mode": "hybrid", "k": 4}
    with running_server(tmp_path) as client:
        r = client.post("/index", json={"collection": "persist", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        before = client.post("/search", json=query).json()["hits"]
    index_dir = tmp_path / "collections" / "persist" / "segments"
    version = json.loads((index_dir / "CURRENT").read_text())["version"]
    manifest = json.loads((index_dir / f"m{version:06d}.json").read_text())
    target = index_dir / manifest["segments"][-1]["name"] / victim
    with open(target, "r+b") as f:  # a crash mid-write, or a bad disk
        f.truncate(target.stat().st_size // 2)
    with running_server(tmp_path) as client:
        after = client.post("/search", json=query).json()["hits"]
        assert client.get("/collections/persist").json()["index"]["version"] == version + 1  # rebuilt
    assert [(h["id"], h["score"]) for h in after] == [(h["id"], h["score"]) for h in before]
