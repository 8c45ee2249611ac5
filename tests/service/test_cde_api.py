"""A collection with a contextual (CDE) embedder, through real HTTP: index, search, and the context it uses."""

from __future__ import annotations

import time
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


def test_a_drifted_cde_collection_refreshes_its_context_in_a_new_generation(tmp_path: Path, tiny_cde_dir: Path) -> None:
    ModelRegistry(tmp_path / "models").register("cde", tiny_cde_dir)
    with running_server(tmp_path, context_refresh_fraction=0.5) as client:
        r = client.post("/index", json={"collection": "ctx", "documents": DOCS, "embedder": "cde"})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        more = [{"id": f"e{i}", "text": f"new work on subject{i % 3}"} for i in range(10)]
        r = client.post("/index", json={"collection": "ctx", "documents": more})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        deadline = time.time() + 60
        while (gens := client.get("/collections/ctx").json()["generations"])["current"]["generation"] != 1:
            assert time.time() < deadline, gens
            building = gens["building"]
            if building and building.get("job"):  # the refresh is a job like any other: progress, cancel
                assert client.get(f"/jobs/{building['job']}").json()["kind"] == "reindex"
            hits = client.post("/search", json={"collection": "ctx", "query": "topic2", "k": 3}).json()["hits"]
            assert len(hits) == 3  # the current generation serves throughout
            time.sleep(0.05)
        assert gens["current"]["embedder"] == gens["previous"]["embedder"] == "cde"
        assert (tmp_path / "collections" / "ctx" / "generations" / "1" / "context" / "context.json").is_file()
        r = client.post("/search", json={"collection": "ctx", "query": "subject1", "k": 20})
        assert {h["id"] for h in r.json()["hits"]} == {d["id"] for d in DOCS + more}
