"""Generations around a switch, through the job runner: writes made while a reindex builds reach the new generation
at promotion (metadata without the encoder), a writer that waited through a switch writes the new one, and cancel,
the gate, clean-up and a chosen fusion. Reindex, rollback and vector copies: test_generations.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexing import gen_sync
from indexing import generations as gens
from indexing.engine import LOCAL_FANOUT
from indexing.engine import search as engine_search
from indexing.gen_sync import stored_hashes
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus
from indexing.ranking import RankRequest
from indexing.reindex import clean_all
from tests.indexing.generation_helpers import DOCS, encoded_ids, make_env, run_one_job, run_reindex
from tests.tiny_models import save_tiny_bert


@pytest.fixture(scope="module")
def second_embedder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-two"))


@pytest.fixture
def env(tmp_path: Path, tiny_embedder_dir: Path) -> dict[str, Any]:
    return make_env(tmp_path, tiny_embedder_dir)


def test_writes_after_the_build_reach_the_new_generation_at_promotion(
    env: dict[str, Any], second_embedder: Path
) -> None:
    store, root = env["store"], env["root"]
    job_id = run_reindex(env, second_embedder, promote="manual")
    assert env["jobs"].get(job_id).result == {**env["jobs"].get(job_id).result, "promoted": False}
    assert gens.generation_of(store.get("c")) == 0  # still serving the old one
    new = [{"id": "n1", "text": "a brand new document about volcanoes"}]
    assert run_one_job(env, JobKind.UPSERT, new) == JobStatus.SUCCEEDED
    assert run_one_job(env, JobKind.DELETE, ["d0", "d1"]) == JobStatus.SUCCEEDED
    assert run_one_job(env, JobKind.UPSERT, [{"id": "d2", "text": "rewritten"}]) == JobStatus.SUCCEEDED
    building = gens.open_generation(root, 1)
    assert "n1" not in stored_hashes(building)
    assert run_one_job(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    coll = store.get("c")
    assert gens.generation_of(coll) == 1
    hashes = stored_hashes(coll)
    assert "n1" in hashes and "d0" not in hashes and "d1" not in hashes and len(hashes) == len(DOCS) - 1
    assert coll.document("d2").text == "rewritten"  # type: ignore[union-attr]
    assert coll.view().seq == coll.docstore.seq()  # published: searches see it


def test_a_metadata_change_during_a_reindex_is_not_embedded_again(
    env: dict[str, Any], second_embedder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, root = env["store"], env["root"]
    run_reindex(env, second_embedder, promote="manual")
    patch = [{"id": "d3", "metadata": {"year": 2024}, "mode": "merge"}]
    assert run_one_job(env, JobKind.PATCH, patch) == JobStatus.SUCCEEDED
    before = gens.open_generation(root, 1).document("d3")
    embedded = encoded_ids(monkeypatch)
    assert run_one_job(env, JobKind.PROMOTE, [{"collection": "c"}]) == JobStatus.SUCCEEDED
    coll = store.get("c")
    after = coll.document("d3")
    assert gens.generation_of(coll) == 1 and embedded == []  # caught up without the encoder
    assert after is not None and before is not None and after.metadata == {"year": 2024}
    assert stored_hashes(coll)["d3"] == stored_hashes(gens.open_generation(root, 0))["d3"]


def test_a_writer_that_waited_through_a_switch_writes_the_new_generation(
    env: dict[str, Any], second_embedder: Path
) -> None:
    store = env["store"]
    old = store.get("c")
    run_reindex(env, second_embedder)
    store._open["c"] = old  # as a worker process that has not followed yet sees it
    assert run_one_job(env, JobKind.UPSERT, [{"id": "late", "text": "written after the switch"}]) == JobStatus.SUCCEEDED
    coll = store.get("c")
    assert gens.generation_of(coll) == 1 and coll.document("late") is not None


def test_cancel_removes_the_partial_generation(env: dict[str, Any], second_embedder: Path) -> None:
    jobs, root = env["jobs"], env["root"]
    spec = {"collection": "c", "embedder": str(second_embedder)}
    job = jobs.create(collection="c", kind=JobKind.REINDEX, payload=[spec])
    jobs.start(job.id)
    jobs.request_cancel(job.id)
    status = run_job(job_id=job.id, jobs=jobs, collections=env["store"], embedders=env["embedders"])
    assert status == JobStatus.CANCELLED
    assert gens.on_disk(root) == [0] and gens.read_pointer(root).building is None


@pytest.mark.parametrize("how", ["cancel", "delete"])
def test_a_reindex_stops_within_a_step_of_embedding_when_cancelled_or_deleted(
    env: dict[str, Any], second_embedder: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A cancel, or the collection's deletion (which cancels its jobs), used to wait for the whole page of 256
    documents to be embedded (minutes with a large model), and a deletion made the build fail on its vanished
    files. Now the job stops at the next step of EMBED_STEP documents and ends cancelled either way."""
    jobs, store = env["jobs"], env["store"]
    monkeypatch.setattr(gen_sync, "EMBED_STEP", 8)  # DOCS' 40 documents: five steps in the one page
    spec = {"collection": "c", "embedder": str(second_embedder), "reencode": True}
    job = jobs.create(collection="c", kind=JobKind.REINDEX, payload=[spec])
    jobs.start(job.id)
    real, steps = gen_sync.prepare_documents, []

    def one_step(*args: Any, **kwargs: Any) -> Any:
        steps.append(1)
        if len(steps) == 2:  # asked while the second step is embedded
            if how == "cancel":
                jobs.request_cancel(job.id)
            else:  # as DELETE /collections/c does
                jobs.cancel_collection("c")
                store.delete("c")
        return real(*args, **kwargs)

    monkeypatch.setattr(gen_sync, "prepare_documents", one_step)
    status = run_job(job_id=job.id, jobs=jobs, collections=store, embedders=env["embedders"])
    assert status == JobStatus.CANCELLED and len(steps) == 2, (status, jobs.get(job.id).error)
    if how == "cancel":
        assert gens.on_disk(env["root"]) == [0] and gens.read_pointer(env["root"]).building is None
    else:
        assert not env["root"].exists()


def test_a_reindex_that_fails_drops_what_it_built(
    env: dict[str, Any], second_embedder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that raised (here its gate) left its generation named as building: on disk, and holding its model
    against `vela models remove` until another reindex replaced it."""
    from indexing import reindex

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the gate's judged set has no query with judgements")

    monkeypatch.setattr(reindex, "_gate", unreadable)
    job_id = run_reindex(env, second_embedder, gate={"queries": {"q": "moon"}, "qrels": {"q": {"d1": 1}}})
    job = env["jobs"].get(job_id)
    assert job.status == JobStatus.FAILED and "no query with judgements" in (job.error or "")
    assert gens.on_disk(env["root"]) == [0] and gens.read_pointer(env["root"]).building is None
    assert gens.generation_of(env["store"].get("c")) == 0


def _top1(coll: Any, emb: Any, queries: dict[str, str]) -> dict[str, dict[str, int]]:
    """Judgements that say each query's own top dense hit is the relevant one: that generation scores 1.0."""
    texts = list(queries.values())
    fused = engine_search(coll, LOCAL_FANOUT, emb.encode_queries(texts), texts, RankRequest(mode="dense", k=1))
    hits = coll.passages({f.top[0][2]: 0 for f in fused})
    return {q: {hits[f.top[0][2]].doc_id: 1} for q, f in zip(queries, fused, strict=True)}


def test_gate_passes_an_equal_generation_and_refuses_a_worse_one(env: dict[str, Any], second_embedder: Path) -> None:
    coll = env["store"].get("c")
    queries = {f"q{i}": f"moon number {i} topic{i % 4}" for i in range(0, 40, 2)}
    qrels = _top1(coll, env["embedders"].get(coll.settings.embedder), queries)
    # BM25 reads the same texts in both generations: equal figures, the gate passes.
    ok = run_reindex(env, second_embedder, gate={"queries": queries, "qrels": qrels, "mode": "bm25"}, promote="manual")
    res = env["jobs"].get(ok).result
    assert res is not None and res["gate"]["passed"] and res["gate"]["old"] == res["gate"]["new"]
    # Dense, judged by what the serving model finds: another random model scores far lower and is refused.
    bad = run_reindex(env, second_embedder, gate={"queries": queries, "qrels": qrels, "mode": "dense"})
    job = env["jobs"].get(bad)
    assert job.status == JobStatus.FAILED and job.error is not None and "gate refused" in job.error
    gate = job.result["gate"]  # type: ignore[index]
    assert gate["old"] == 1.0 and gate["new"] < gate["old"] and not gate["passed"]
    assert gens.generation_of(env["store"].get("c")) == 0 and gens.on_disk(env["root"]) == [0]


def test_clean_removes_orphans_and_keeps_a_running_reindex(env: dict[str, Any], second_embedder: Path) -> None:
    root, jobs = env["root"], env["jobs"]
    (root / "generations").mkdir(exist_ok=True)
    (root / "generations" / "7").mkdir()  # no pointer names it (a crash between its build and the pointer)
    (root / "generations" / ".new-x").mkdir()
    clean_all(env["store"], jobs)
    assert gens.on_disk(root) == [0] and not (root / "generations" / ".new-x").exists()


def test_a_chosen_fusion_is_chosen_again_for_the_new_embedder(env: dict[str, Any], second_embedder: Path) -> None:
    store = env["store"]
    coll = store.get("c")
    with coll.writer():  # as the background choice leaves it, for the old embedder
        coll.set_fusion({"method": "rrf", "chosen": {"documents": len(DOCS), "at": 1.0}})
    run_reindex(env, second_embedder)
    fusion = store.get("c").settings.fusion
    assert gens.generation_of(store.get("c")) == 1 and fusion["chosen"]["at"] != 1.0
    # One an operator set (no "chosen" record) is kept as it is.
    with store.get("c").writer():
        store.get("c").set_fusion({"method": "rrf"})
    run_reindex(env, second_embedder)
    assert store.get("c").settings.fusion == {"method": "rrf"}
