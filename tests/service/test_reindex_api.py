"""POST /collections/{name}/reindex, promote and rollback over real HTTP: the serving generation keeps answering,
writes made meanwhile reach the new one, rollback brings back the previous results exactly, a gate refuses a
worse model with both figures, and a refused or cancelled reindex leaves the serving generation and the rollback
target as they were (POST rollback still works) and nothing else behind."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import indexing.gen_sync
import indexing.reindex
from indexing import generations as gens
from indexing.merger import wait_background
from models.registry import ModelRegistry
from tests.service.conftest import running_app, wait_job
from tests.tiny_models import save_tiny_bert

TOPICS = ["tides", "volcano", "insulin", "graphene", "appeals", "enzymes"]
DOCS = [
    {"id": f"d{i}", "title": f"{TOPICS[i % 6]} {i}", "text": f"{TOPICS[i % 6]} study {i}: findings on {TOPICS[i % 6]}"}
    for i in range(60)
]
QUERIES = {f"q{i}": f"{TOPICS[i % 6]} study {i}" for i in range(0, 60, 3)}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[tuple[httpx.Client, Path]]:
    root = tmp_path_factory.mktemp("reindex")
    data = root / "data"
    registry = ModelRegistry(data / "models")
    registry.register("tiny", tiny_embedder_dir)
    registry.register("tiny2", save_tiny_bert(root / "tiny2"))
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        r = client.post("/index", json={"collection": "c", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        yield client, data


def _search(client: httpx.Client, query: str = "tides study", mode: str = "dense") -> list[tuple[str, float]]:
    r = client.post("/search", json={"collection": "c", "query": query, "mode": mode, "k": 10})
    assert r.status_code == 200, r.text
    return [(h["id"], h["score"]) for h in r.json()["hits"]]


def _post(client: httpx.Client, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    r = client.post(path, json=body or {})
    assert r.status_code == 202, r.text
    return wait_job(client, r.json()["job_id"])


def _generations(client: httpx.Client) -> dict[str, Any]:
    return dict(client.get("/collections/c").json()["generations"])


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step of a reindex takes a while (a few documents at a time): long enough to act during it."""
    real = indexing.gen_sync.prepare_documents

    def slowly(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.03)
        return real(*args, **kwargs)

    monkeypatch.setattr(indexing.gen_sync, "PAGE", 4)
    monkeypatch.setattr(indexing.gen_sync, "prepare_documents", slowly)


def test_promote_auto_then_rollback_restores_the_previous_results_exactly(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    # Merges and the fusion choice after the ingest run in the background and would change scores in their last
    # bits by themselves (other segments, other BLAS blocking): the results rollback restores are the settled ones.
    assert wait_background(60)
    before = {q: _search(client, q) for q in QUERIES.values()}
    old = _generations(client)["current"]
    job = _post(client, "/collections/c/reindex", {"embedder": "tiny2"})
    assert job["status"] == "succeeded" and job["kind"] == "reindex", job
    assert job["result"]["promoted"] is True and job["done"] == job["total"] == len(DOCS)
    now = _generations(client)
    assert now["current"]["embedder_name"] == "tiny2" and now["previous"]["generation"] == old["generation"]
    assert client.get("/collections/c").json()["embedder"] == now["current"]["embedder"] == "tiny2"
    assert "/" not in now["previous"]["embedder"]  # registry names in responses, never server paths
    after = {q: _search(client, q) for q in QUERIES.values()}
    assert after != before  # other vectors: other scores
    assert _post(client, "/collections/c/rollback")["status"] == "succeeded"
    restored = {q: _search(client, q) for q in QUERIES.values()}
    # The same documents in the same order, the same scores: to float32's last bits, which the torch encoder's
    # first pass in a process (the first query of `before`) did not always reproduce on later passes.
    for q, hits in restored.items():
        assert [d for d, _ in hits] == [d for d, _ in before[q]]
        assert [s for _, s in hits] == pytest.approx([s for _, s in before[q]], abs=1e-6)
    assert _generations(client)["current"]["generation"] == old["generation"]
    assert len(gens.on_disk(data / "collections" / "c")) == 2


def test_manual_promotion_catches_up_with_writes_made_while_it_waited(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    job = _post(client, "/collections/c/reindex", {"embedder": "tiny2", "promote": "manual"})
    assert job["status"] == "succeeded" and job["result"]["promoted"] is False
    waiting = _generations(client)["building"]
    assert waiting["ready"] is True and waiting["embedder_name"] == "tiny2"
    # Serving, the rollback target and the one waiting: three while a reindex's generation waits for promotion.
    kept = _generations(client)
    assert kept["previous"] is not None and len(gens.on_disk(data / "collections" / "c")) == 3
    r = client.post("/index", json={"collection": "c", "documents": [{"id": "new1", "text": "a volcano erupted"}]})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    assert wait_job(client, client.delete("/collections/c/documents/d5").json()["job_id"])["status"] == "succeeded"
    promoted = _post(client, "/collections/c/promote")
    assert promoted["status"] == "succeeded" and (promoted["done"], promoted["total"]) == (
        0,
        0,
    )  # a switch counts no documents
    gen = _generations(client)
    assert gen["current"]["generation"] == waiting["generation"] and gen["building"] is None
    # The promotion retired the old rollback target: the one that served is kept now, two on disk.
    assert gen["previous"]["generation"] == kept["current"]["generation"]
    assert gens.on_disk(data / "collections" / "c") == sorted(
        [gen["current"]["generation"], kept["current"]["generation"]]
    )
    assert client.get("/collections/c/documents/new1").status_code == 200
    assert client.get("/collections/c/documents/d5").status_code == 404
    assert "new1" in [h for h, _ in _search(client, "a volcano erupted", mode="bm25")]
    r = client.post("/collections/c/promote")  # nothing waits any more
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"


def test_writes_during_a_reindex_run_at_once_and_reach_the_new_generation(
    app: tuple[httpx.Client, Path], slow: None
) -> None:
    client, _ = app
    searched: list[int] = []
    errors: list[str] = []
    stop = threading.Event()

    def searches() -> None:
        while not stop.is_set():
            r = client.post("/search", json={"collection": "c", "query": "tides study", "mode": "hybrid"})
            if r.status_code != 200 or not r.json()["hits"]:
                errors.append(r.text)
            searched.append(1)

    thread = threading.Thread(target=searches)
    thread.start()
    try:
        reindex = client.post("/collections/c/reindex", json={"embedder": "tiny"}).json()["job_id"]
        while client.get(f"/jobs/{reindex}").json()["done"] < 8:
            time.sleep(0.02)
        docs = [{"id": f"during{i}", "text": f"graphene sheet {i}"} for i in range(5)]
        write = wait_job(client, client.post("/index", json={"collection": "c", "documents": docs}).json()["job_id"])
        delete = wait_job(client, client.delete("/collections/c/documents/d7").json()["job_id"])
        # The writes ran beside the reindex, not after it.
        assert write["status"] == delete["status"] == "succeeded"
        job = client.get(f"/jobs/{reindex}").json()
        assert job["status"] == "running" and job["eta_s"] is not None, job
        first_total = job["total"]
        job = wait_job(client, reindex)
    finally:
        stop.set()
        thread.join()
    assert job["status"] == "succeeded", job
    # The catch-up pass counts too: the total grew by the documents written during the build, all done by the end.
    assert job["total"] == client.get("/collections/c").json()["documents"] and job["done"] == job["total"], job
    assert first_total is not None and job["total"] >= first_total
    assert _generations(client)["current"]["embedder_name"] == "tiny"
    for i in range(5):
        assert client.get(f"/collections/c/documents/during{i}").status_code == 200
    assert client.get("/collections/c/documents/d7").status_code == 404
    assert errors == [] and len(searched) > 5


def test_cancel_leaves_the_serving_generation_and_nothing_else(app: tuple[httpx.Client, Path], slow: None) -> None:
    client, data = app
    before = _generations(client)
    job_id = client.post("/collections/c/reindex", json={"embedder": "tiny2"}).json()["job_id"]
    # Sent at once, while the first may still be queued: refused too (one reindex of a collection at a time).
    again = client.post("/collections/c/reindex", json={"embedder": "tiny2"})
    assert again.status_code == 409 and job_id in again.json()["error"]["message"]
    while client.get(f"/jobs/{job_id}").json()["done"] < 8:
        time.sleep(0.02)
    assert client.post("/collections/c/reindex", json={"embedder": "tiny2"}).status_code == 409  # one at a time
    assert client.delete(f"/jobs/{job_id}").status_code == 200
    assert wait_job(client, job_id)["status"] == "cancelled"
    after = _generations(client)
    assert before["previous"] is not None  # an earlier test promoted: there is a rollback target to keep
    assert after["current"] == before["current"] and after["previous"] == before["previous"]
    assert after["building"] is None
    kept = sorted([before["current"]["generation"], before["previous"]["generation"]])
    assert gens.on_disk(data / "collections" / "c") == kept  # the partial generation went, nothing else
    assert _search(client)  # still serving


def test_gate_refuses_a_worse_embedder_with_both_figures(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    # Judgements made from the serving generation's own top hit: it scores 1.0 on them, another random model less.
    qrels = {}
    for qid, text in QUERIES.items():
        qrels[qid] = {_search(client, text)[0][0]: 1}
    before = _generations(client)
    assert before["previous"] is not None  # an earlier test promoted: there is a rollback target to keep
    inline = {"queries": QUERIES, "qrels": qrels, "mode": "dense", "tolerance": 0.01}
    job = _post(client, "/collections/c/reindex", {"embedder": "tiny2", "gate": inline})
    assert job["status"] == "failed" and "gate refused" in job["error"], job
    gate = job["result"]["gate"]
    assert gate["old"] == 1.0 and gate["new"] < gate["old"] - 0.01 and gate["passed"] is False
    assert gate["metric"] == "ndcg@10" and gate["mode"] == "dense" and gate["queries"] == len(QUERIES)
    # Nothing switched, so nothing changed: the same generation serves and the same one is kept for rollback.
    assert _generations(client) == before
    assert _post(client, "/collections/c/rollback")["status"] == "succeeded"
    assert _generations(client)["current"] == before["previous"]
    assert _post(client, "/collections/c/rollback")["status"] == "succeeded"  # and forward again
    assert _generations(client)["current"] == before["current"]
    # The same set as a registered dataset, named; a name that is not registered is one fixed 422.
    folder = data / "datasets" / "judged"
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text("\n".join(json.dumps({"_id": q, "text": t}) for q, t in QUERIES.items()))
    rows = [f"{q}\t{d}\t1" for q, docs in qrels.items() for d in docs]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    job = _post(client, "/collections/c/reindex", {"embedder": "tiny2", "gate": {"dataset": "judged", "mode": "bm25"}})
    assert job["status"] == "succeeded" and job["result"]["gate"]["passed"], job
    for bad in ["nope", "../judged", "/etc", "judged/../judged", "~"]:
        r = client.post("/collections/c/reindex", json={"embedder": "tiny2", "gate": {"dataset": bad}})
        assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_dataset", bad
        assert r.json()["error"]["message"] == "gate.dataset: no registered dataset of that name"
    r = client.post("/collections/c/reindex", json={"embedder": "tiny2", "gate": {"queries": {}, "qrels": {}}})
    assert r.status_code == 422, r.text  # the field's name once, not "gate: gate: ..."
    assert r.json()["error"]["message"] == "gate: inline queries and qrels must both be given and not empty"


def test_errors(app: tuple[httpx.Client, Path]) -> None:
    client, _ = app
    assert client.post("/collections/nope/reindex", json={"embedder": "tiny2"}).status_code == 404
    assert client.post("/collections/nope/rollback").status_code == 404
    r = client.post("/collections/c/reindex", json={"embedder": "tiny2", "gate": {"mode": "dense"}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    r = client.post("/collections/c/reindex", json={"embedder": "tiny2", "promote": "later"})
    assert r.status_code == 422


def test_a_collection_shows_the_name_it_was_reindexed_with(app: tuple[httpx.Client, Path]) -> None:
    """`tiny` is a registered name of the folder the server serves by default: after a reindex to it, the collection's
    embedder is `tiny` (as its generation says), not the first name that folder answers to."""
    client, _ = app
    r = client.post("/index", json={"collection": "named", "documents": DOCS[:6]})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    assert _post(client, "/collections/named/reindex", {"embedder": "tiny"})["status"] == "succeeded"
    assert client.get("/collections/named").json()["embedder"] == "tiny"
    listed = {c["name"]: c["embedder"] for c in client.get("/collections").json()["collections"]}
    assert listed["named"] == "tiny"


def test_a_second_rollback_sent_before_the_first_ran_is_refused(
    app: tuple[httpx.Client, Path], slow: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A switch acts on the generations as they are when it runs: a retried rollback would undo the first one, so
    one sent while a generation job of the collection is unfinished is a 409 naming that job."""
    client, _ = app
    real_rollback = indexing.reindex.rollback

    def slow_rollback(*args: Any, **kwargs: Any) -> Any:  # still running when the second is sent, on any machine
        time.sleep(1.0)
        return real_rollback(*args, **kwargs)

    monkeypatch.setattr(indexing.reindex, "rollback", slow_rollback)
    r = client.post("/index", json={"collection": "twice", "documents": DOCS[:8]})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    assert _post(client, "/collections/twice/reindex", {"embedder": "tiny"})["status"] == "succeeded"
    reindex = client.post("/collections/twice/reindex", json={"embedder": "tiny2"}).json()["job_id"]
    during = client.post("/collections/twice/rollback")  # the reindex is queued or running (a slow one)
    assert during.status_code == 409 and reindex in during.json()["error"]["message"], during.text
    assert wait_job(client, reindex)["status"] == "succeeded"
    first = client.post("/collections/twice/rollback")
    second = client.post("/collections/twice/rollback")
    assert first.status_code == 202 and second.status_code == 409, second.text
    assert first.json()["job_id"] in second.json()["error"]["message"]
    assert wait_job(client, first.json()["job_id"])["status"] == "succeeded"
    shown = client.get("/collections/twice").json()["generations"]
    assert shown["current"]["embedder"] == "tiny" and shown["previous"]["embedder"] == "tiny2"


def test_a_removed_model_is_shown_unregistered_and_every_generation_has_its_name(
    app: tuple[httpx.Client, Path],
) -> None:
    """A collection reindexed with a name whose model was later removed (`vela models remove --force`) shows the
    model as `unregistered`, as a search that needs it says; generation 0 carries its name as every other does."""
    client, data = app
    registry = ModelRegistry(data / "models")
    registry.register("short-lived", save_tiny_bert(data.parent / "short-lived"))
    r = client.post("/index", json={"collection": "orphan", "documents": DOCS[:6]})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    assert _post(client, "/collections/orphan/reindex", {"embedder": "short-lived"})["status"] == "succeeded"
    shown = client.get("/collections/orphan").json()
    assert shown["embedder"] == shown["generations"]["current"]["embedder_name"] == "short-lived"
    previous = shown["generations"]["previous"]
    assert previous["generation"] == 0 and previous["embedder_name"] == previous["embedder"] is not None
    registry.remove("short-lived")
    shown = client.get("/collections/orphan").json()
    assert shown["embedder"] == "unregistered", shown
    assert shown["generations"]["current"]["embedder"] == shown["generations"]["current"]["embedder_name"]
    assert shown["generations"]["current"]["embedder"] == "unregistered"
