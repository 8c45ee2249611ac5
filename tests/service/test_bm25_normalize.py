"""BM25 text is Unicode-normalised (NFKC) in new collections: one text written two ways is one term (a composed
"é" and an "e" with a combining accent, a ligature, full-width letters), for documents, queries and highlights;
`VELA_BM25_NORMALIZE=none` and collections stored before the setting existed keep the text as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.service.conftest import running_app, wait_job

DOCS = [
    {"id": "decomposed", "text": "Le cafe\u0301 du port"},  # "café" as e + U+0301
    {"id": "ligature", "text": "The \ufb01nance report"},  # "ﬁnance"
    {"id": "wide", "text": "\uff36\uff25\uff2c\uff21 notes"},  # full-width "ＶＥＬＡ"
]


def _bm25(client: Any, query: str) -> list[dict[str, Any]]:
    body = {"collection": "u", "query": query, "mode": "bm25", "highlight": True}
    r = client.post("/search", json=body)
    assert r.status_code == 200, r.text
    return list(r.json()["hits"])


def test_one_text_written_two_ways_is_one_term(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_app(tmp_path / "nfkc", embedder=str(tiny_embedder_dir)) as (client, _):
        r = client.post("/index", json={"collection": "u", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        assert client.get("/collections/u").json()["index"]["bm25"]["normalize"] == "nfkc"
        for query, doc, word in (
            ("caf\u00e9", "decomposed", "cafe\u0301"),  # composed query, decomposed text
            ("cafe\u0301", "decomposed", "cafe\u0301"),
            ("finance", "ligature", "\ufb01nance"),
            ("vela", "wide", "\uff36\uff25\uff2c\uff21"),
        ):
            hits = _bm25(client, query)
            assert [h["id"] for h in hits] == [doc], query
            text = hits[0]["text"]
            assert [text[a:b] for a, b in hits[0]["highlights"]] == [word], query  # offsets into the stored text
    with running_app(tmp_path / "none", embedder=str(tiny_embedder_dir), bm25_normalize="none") as (client, _):
        r = client.post("/index", json={"collection": "u", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        assert client.get("/collections/u").json()["index"]["bm25"]["normalize"] == "none"
        assert _bm25(client, "caf\u00e9") == [] and _bm25(client, "finance") == []
        assert [h["id"] for h in _bm25(client, "cafe\u0301")] == ["decomposed"]
