"""On a local two-node Ray cluster: SciFact ingested into 3 shards with Ray Data and searched through shard
actors returns what the unsharded collection returns, for every test query in every mode."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench.ray_scifact import same_top
from cli.main import main
from indexing.collection import CollectionSettings
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStore
from indexing.shards import ShardedCollection
from indexing.store import CollectionStore
from models import EmbedderCache
from service.search import search_batch
from tests.service.conftest import running_server, wait_job
from velaio.beir import read_corpus, read_qrels, read_queries

pytest.importorskip("ray")
pytestmark = pytest.mark.ray
BATCH = 64


def test_scifact_three_shards_on_ray_return_the_single_node_top10(
    ray_cluster: str, beir_dir: Path, tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    from indexing.ray_ingest import ingest_sharded
    from indexing.ray_shards import RayFanout

    data = beir_dir / "scifact"
    docs = list(read_corpus(data))
    store, jobs = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3")
    embedder = EmbedderCache().get(tiny_embedder_dir)
    one = store.create(CollectionSettings(name="one", embedder=str(tiny_embedder_dir), dim=embedder.dim))
    job = jobs.create(collection="one", kind=JobKind.UPSERT, payload=docs)
    assert run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache()) == "succeeded"
    three = store.create(replace(one.settings, name="three", shards=3))
    assert isinstance(three, ShardedCollection)
    progress: list[int] = []
    assert ingest_sharded(coll=three, documents=docs, address=ray_cluster, on_progress=lambda d, _: progress.append(d))
    assert progress[-1] == len(docs) and three.stats()["passages"] == one.stats()["passages"]

    queries = read_queries(data)
    texts = [queries[q] for q in read_qrels(data, "test") if q in queries]
    assert len(texts) == 300
    fanout = RayFanout(ray_cluster)
    for mode in ("bm25", "dense", "hybrid"):
        for start in range(0, len(texts), BATCH):
            part = texts[start : start + BATCH]
            want = search_batch(collection=one, embedder=embedder, queries=part, k=10, mode=mode)  # type: ignore[arg-type]
            got = search_batch(collection=three, fanout=fanout, embedder=embedder, queries=part, k=10, mode=mode)  # type: ignore[arg-type]
            for q, w, g in zip(part, want, got, strict=True):
                assert same_top(w.hits, g.hits, scores=mode != "hybrid"), (mode, q, w.hits, g.hits)
    # A shard actor that dies (its node went away) is made again on the next search.
    import ray

    ray.kill(next(iter(fanout._actors.values())))
    again = search_batch(collection=three, fanout=fanout, embedder=embedder, queries=texts[:5], k=10)
    want = search_batch(collection=one, embedder=embedder, queries=texts[:5], k=10)
    assert [[h.id for h in r.hits] for r in again] == [[h.id for h in r.hits] for r in want]


def test_vela_ingest_on_ray(
    ray_cluster: str, tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "docs.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"words {i} on tides"}) for i in range(40)))
    argv = ["ingest", "--data", str(data), "--collection", "c", "--shards", "2", "--ray", ray_cluster]
    assert main([*argv, "--data-dir", str(tmp_path / "vela"), "--embedder", str(tiny_embedder_dir)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "succeeded" and printed["stats"]["documents"] == 40
    assert JobStore(tmp_path / "vela" / "jobs.sqlite3").get(printed["job_id"]).done == 40


def test_api_with_a_ray_address_ingests_and_searches_on_the_cluster(
    ray_cluster: str, tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    docs = [
        {"id": f"d{i}", "text": f"topic {i % 6} words {i} about tides and moons", "metadata": {"tenant": f"t{i % 4}"}}
        for i in range(60)
    ]
    with running_server(tmp_path, ray_address=ray_cluster, embedder=str(tiny_embedder_dir)) as client:
        for name, extra in (("one", {}), ("three", {"shards": 3})):
            r = client.post("/index", json={"collection": name, "documents": docs, **extra})
            job = wait_job(client, r.json()["job_id"], timeout=300)
            assert (job["status"], job["done"], job["total"]) == ("succeeded", 60, 60), job
        for mode in ("bm25", "dense", "hybrid"):
            hits = [
                client.post("/search", json={"collection": c, "query": "tides topic 3", "mode": mode}).json()["hits"]
                for c in ("one", "three")
            ]
            assert hits[0] and [h["id"] for h in hits[0]] == [h["id"] for h in hits[1]], mode
            flt = {"must": [{"key": "tenant", "match": {"any": ["t1", "t2"]}}]}  # filters reach the Ray actors
            body = {"query": "tides topic 3", "mode": mode, "filter": flt, "k": 20}
            hits = [client.post("/search", json={"collection": c, **body}).json()["hits"] for c in ("one", "three")]
            assert hits[0] and [h["id"] for h in hits[0]] == [h["id"] for h in hits[1]], mode
            assert all(h["metadata"]["tenant"] in ("t1", "t2") for h in hits[1])
