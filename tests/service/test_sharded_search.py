"""Sharded search without Ray: the in-process fan-out returns what the unsharded collection returns."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStore
from indexing.merger import wait_background
from indexing.store import CollectionStore
from models import EmbedderCache
from service.search import search_batch
from tests.service.conftest import running_server, wait_job

TOPICS = ["tides moon gravity", "insulin blood sugar", "volcano magma crust", "graphene carbon sheet", "court appeal"]
DOCS = [
    {"id": f"d{i}", "title": f"note {i % 4}", "text": f"{TOPICS[i % 5]} study {i}. " + "more words here " * (i % 9)}
    for i in range(120)
]
QUERIES = ["moon gravity", "blood sugar insulin", "magma", "carbon sheet study", "appeal court study 7", "words"]


def _same(a: list, b: list) -> bool:
    return [(h.id, h.passage_id) for h in a] == [(h.id, h.passage_id) for h in b] and all(
        abs(x.score - y.score) <= 1e-5 for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("fusion", [{"method": "rrf"}, {"method": "convex", "alpha": 0.3, "normalization": "minmax"}])
@pytest.mark.parametrize("group_by_doc", [True, False])
def test_sharded_equals_unsharded_in_every_mode(
    tmp_path: Path, tiny_embedder_dir: Path, group_by_doc: bool, fusion: dict
) -> None:
    store, jobs = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3")
    embedder = EmbedderCache().get(tiny_embedder_dir)
    base = CollectionSettings(name="one", embedder=str(tiny_embedder_dir), dim=embedder.dim)
    colls = {}
    for name, n in (("one", 1), ("three", 3)):
        colls[name] = store.create(replace(base, name=name, shards=n))
        job = jobs.create(collection=name, kind=JobKind.UPSERT, payload=DOCS)
        assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache()) == "succeeded"
    # 120 documents make a fusion choice due, made in the background for each collection on its own pseudo-queries:
    # wait for both, then give both the same fusion, so that only the fan-out differs
    wait_background()
    for coll in colls.values():
        with coll.writer():
            coll.set_fusion(fusion)
    for mode in ("bm25", "dense", "hybrid"):
        for k, depth in ((10, 200), (25, 15)):
            opts = {"queries": QUERIES, "k": k, "mode": mode, "depth": depth, "group_by_doc": group_by_doc}
            want = search_batch(collection=colls["one"], embedder=embedder, **opts)  # type: ignore[arg-type]
            got = search_batch(collection=colls["three"], embedder=embedder, **opts)  # type: ignore[arg-type]
            for q, w, g in zip(QUERIES, want, got, strict=True):
                assert w.hits and _same(w.hits, g.hits), (mode, k, q)
                assert [h.ranks for h in w.hits] == [h.ranks for h in g.hits]


def test_sharded_collection_over_http(tmp_path: Path) -> None:
    with running_server(tmp_path) as client:
        for name, shards in (("one", None), ("three", 3)):
            body = {"collection": name, "documents": DOCS[:30], **({"shards": shards} if shards else {})}
            r = client.post("/index", json=body)
            assert r.status_code == 202, r.text
            assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        info = client.get("/collections/three").json()
        assert (info["shards"], info["documents"]) == (3, 30) and len(info["index"]["shards"]) == 3
        for mode in ("bm25", "dense", "hybrid"):
            hits = [
                client.post("/search", json={"collection": c, "query": "moon gravity", "mode": mode}).json()["hits"]
                for c in ("one", "three")
            ]
            assert [(h["id"], h["passage"]["id"]) for h in hits[0]] == [(h["id"], h["passage"]["id"]) for h in hits[1]]
        r = client.delete("/collections/three/documents/d0")
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        assert client.get("/collections/three").json()["documents"] == 29
        batch = client.post("/search/batch", json={"collection": "three", "queries": ["magma", "insulin"], "k": 3})
        assert batch.status_code == 200 and all(len(r["hits"]) == 3 for r in batch.json()["results"])
        assert client.delete("/collections/three").status_code == 204


@pytest.mark.parametrize(
    ("shards", "status", "needle"),
    [
        (0, 422, "shards: Input should be greater than or equal to 1"),
        (65, 422, "shards: Input should be less than or equal to 64"),
        ("three", 422, "shards: Input should be a valid integer"),
        (2, 409, "collection 'c' already has 1 shard(s)"),
    ],
)
def test_bad_shards_get_a_clear_4xx(
    tmp_path_factory: pytest.TempPathFactory, shards: object, status: int, needle: str
) -> None:
    with running_server(tmp_path_factory.mktemp("shards")) as client:
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "a", "text": "x y"}]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "b", "text": "z"}], "shards": shards})
        assert r.status_code == status, r.text
        assert needle in r.text


def test_the_api_does_not_import_ray() -> None:
    code = "import sys, service.main, service.state, service.api.routes.search; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
