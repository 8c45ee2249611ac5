"""A collection with a contextual (CDE) embedder, through real HTTP: index, search, and the context it uses."""

from __future__ import annotations

from pathlib import Path

from models.registry import ModelRegistry
from tests.service.conftest import running_server, wait_job

DOCS = [
    {"id": f"d{i}", "title": f"Paper {i}", "text": f"a study of topic{i % 4} with finding number {i}"}
    for i in range(10)
]


def test_index_and_search_a_cde_collection(tmp_path: Path, tiny_cde_dir: Path) -> None:
    ModelRegistry(tmp_path / "models").register("cde", tiny_cde_dir)  # requests name models by registry name
    with running_server(tmp_path) as client:
        r = client.post("/index", json={"collection": "ctx", "documents": DOCS, "embedder": "cde"})
        assert r.status_code == 202, r.text
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        for mode in ("dense", "hybrid", "bm25"):
            r = client.post("/search", json={"collection": "ctx", "query": "topic2 finding", "k": 3, "mode": mode})
            assert r.status_code == 200, r.text
            assert len(r.json()["hits"]) == 3
        # The context was sampled from the collection and sits with its indexes.
        assert (tmp_path / "collections" / "ctx" / "context" / "context.json").is_file()
