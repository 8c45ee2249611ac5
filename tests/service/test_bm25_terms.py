"""`VELA_BM25_MIN_TOKEN_CHARS=1`: new collections index single letters and digits, so "vitamin D" finds the
vitamin D document first, and highlights mark the D; the default collection does not (bm25s's pattern)."""

from __future__ import annotations

from pathlib import Path

from tests.service.conftest import running_app, wait_job

DOCS = [
    {"id": "c", "text": "Vitamin C supports the immune system."},
    {"id": "d", "text": "Vitamin D is made in the skin in sunlight."},
]


def _bm25(client: object, query: str) -> list[dict[str, object]]:
    r = client.post("/search", json={"collection": "v", "query": query, "mode": "bm25", "highlight": True})  # type: ignore[attr-defined]
    assert r.status_code == 200, r.text
    return list(r.json()["hits"])


def test_single_letter_terms_when_the_collection_keeps_them(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_app(tmp_path / "one", embedder=str(tiny_embedder_dir), bm25_min_token_chars=1) as (client, _):
        r = client.post("/index", json={"collection": "v", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        assert client.get("/collections/v").json()["index"]["bm25"]["min_token_chars"] == 1
        hits = _bm25(client, "vitamin D")
        assert hits[0]["id"] == "d" and hits[0]["score"] > hits[1]["score"]
        assert [h["id"] for h in _bm25(client, "D")] == ["d"]
        assert hits[0]["highlights"] == [[0, 7], [8, 9]]
    with running_app(tmp_path / "two", embedder=str(tiny_embedder_dir)) as (client, _):
        r = client.post("/index", json={"collection": "v", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        assert client.get("/collections/v").json()["index"]["bm25"]["min_token_chars"] == 2
        assert _bm25(client, "D") == []
        hits = _bm25(client, "vitamin D")
        assert hits[0]["score"] == hits[1]["score"]  # D is no term: both documents match "vitamin" alone
