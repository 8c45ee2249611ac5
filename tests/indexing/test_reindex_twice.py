"""A generation job run twice, as a job delivered twice is (two workers at once, or a takeover from a worker that
still runs it): the job ends succeeded with the promoting run's result, whatever the other run finds."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest

import indexing.reindex as reindex_mod
from indexing import generations as gens
from indexing.gen_switch import SwitchedAlready, switch
from indexing.ingest import run_job
from indexing.jobs import JobKind, JobStatus
from indexing.reindex import run_generation_job
from tests.indexing.generation_helpers import DOCS, encoded_ids, make_env
from tests.tiny_models import save_tiny_bert


@pytest.fixture(scope="module")
def second_embedder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-two"))


@pytest.fixture
def env(tmp_path: Path, tiny_embedder_dir: Path) -> dict[str, Any]:
    return make_env(tmp_path, tiny_embedder_dir)


def _reindex_job(env: dict[str, Any], embedder: Path) -> str:
    spec = {"collection": "c", "embedder": str(embedder), "embedder_name": "two", "reencode": True}
    return str(env["jobs"].create(collection="c", kind=JobKind.REINDEX, payload=[spec]).id)


def _run(env: dict[str, Any], job_id: str, worker: str) -> JobStatus:
    return run_job(job_id=job_id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"], worker=worker)


def _run_again(env: dict[str, Any], job_id: str) -> JobStatus:
    """The generation job's runner, as a run that passed run_job's check before the job ended goes on."""
    return run_generation_job(job_id=job_id, jobs=env["jobs"], collections=env["store"], embedders=env["embedders"])


def _twice_at_once(env: dict[str, Any], job_id: str) -> list[JobStatus]:
    """Two runs of the job on two threads, started together."""
    statuses: list[JobStatus] = []
    threads = [threading.Thread(target=lambda w=w: statuses.append(_run(env, job_id, w))) for w in ("w1", "w2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    return statuses


def _expect_promoted_once(env: dict[str, Any], job_id: str) -> None:
    job = env["jobs"].get(job_id)
    assert job.status == JobStatus.SUCCEEDED and job.error is None, job.error
    assert job.result is not None and job.result["promoted"] is True and job.result["generation"] == 1
    pointer = gens.read_pointer(env["root"])
    assert (pointer.current, pointer.previous, pointer.last, pointer.building) == (1, 0, 1, None)
    assert gens.on_disk(env["root"]) == [0, 1]


def test_a_run_that_finds_the_job_ended_leaves_its_status_and_result(
    env: dict[str, Any], second_embedder: Path
) -> None:
    """The second run started before the first ended (it passed the runner's check) and goes on after it."""
    job_id = _reindex_job(env, second_embedder)
    assert _run(env, job_id, "w1") == JobStatus.SUCCEEDED
    first = env["jobs"].get(job_id)
    assert first.result is not None and first.result["documents"] == {"embedded": len(DOCS), "copied": 0, "resumed": 0}
    assert _run_again(env, job_id) == JobStatus.SUCCEEDED
    assert env["jobs"].get(job_id) == first
    _expect_promoted_once(env, job_id)
    # A promote or rollback the same.
    rollback = env["jobs"].create(collection="c", kind=JobKind.ROLLBACK, payload=[{"collection": "c"}])
    assert _run(env, rollback.id, "w1") == JobStatus.SUCCEEDED
    done = env["jobs"].get(rollback.id)
    assert _run_again(env, rollback.id) == JobStatus.SUCCEEDED and env["jobs"].get(rollback.id) == done
    assert gens.read_pointer(env["root"]).current == 0


def test_two_runs_at_once_run_one_after_the_other(
    env: dict[str, Any], second_embedder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both runs are past the runner's check before either builds; the second waits for the first and finds the
    job ended: the documents are encoded once, and the result counts all of them."""
    job_id = _reindex_job(env, second_embedder)
    both_started = threading.Barrier(2, timeout=60)
    start = env["jobs"].start

    def started_together(jid: str, worker: str = "in-process") -> Any:
        job = start(jid, worker)
        both_started.wait()
        return job

    monkeypatch.setattr(env["jobs"], "start", started_together)
    inside, most = 0, 0
    real = reindex_mod._reindex

    def counted(*args: Any) -> Any:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        try:
            threading.Event().wait(0.3)  # room for the other run to come in, if nothing holds it back
            return real(*args)
        finally:
            inside -= 1

    monkeypatch.setattr(reindex_mod, "_reindex", counted)
    encoded = encoded_ids(monkeypatch)
    assert _twice_at_once(env, job_id) == [JobStatus.SUCCEEDED, JobStatus.SUCCEEDED]
    assert most == 1
    assert sorted(encoded) == sorted(d["id"] for d in DOCS)
    _expect_promoted_once(env, job_id)
    result = env["jobs"].get(job_id).result
    assert result is not None and result["documents"] == {"embedded": len(DOCS), "copied": 0, "resumed": 0}
    assert env["jobs"].get(job_id).attempts == 2


def test_a_run_that_finds_its_own_switch_made_reports_success(
    env: dict[str, Any], second_embedder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the lock that keeps them apart (another host whose file locks do not reach this one's), both runs
    build and both come to the switch: the one that finds the switch made by this job reports success."""
    monkeypatch.setattr(gens, "job_lock", lambda root: contextlib.nullcontext())
    job_id = _reindex_job(env, second_embedder)
    at_switch = threading.Barrier(2, timeout=120)
    real_switch = reindex_mod.switch

    def together(*args: Any, **kwargs: Any) -> None:
        at_switch.wait()
        real_switch(*args, **kwargs)

    monkeypatch.setattr(reindex_mod, "switch", together)
    raised: list[BaseException] = []
    real = reindex_mod._reindex

    def recorded(*args: Any) -> Any:
        try:
            return real(*args)
        except BaseException as exc:
            raised.append(exc)
            raise

    monkeypatch.setattr(reindex_mod, "_reindex", recorded)
    assert _twice_at_once(env, job_id) == [JobStatus.SUCCEEDED, JobStatus.SUCCEEDED]
    assert raised == []
    _expect_promoted_once(env, job_id)


def test_the_switch_tells_its_own_job_from_another(env: dict[str, Any], second_embedder: Path) -> None:
    job_id = _reindex_job(env, second_embedder)
    assert _run(env, job_id, "w1") == JobStatus.SUCCEEDED
    root = env["root"]
    old, new = gens.open_generation(root, 0), gens.open_generation(root, 1)
    embedder = env["embedders"].get(str(second_embedder))
    before = gens.read_pointer(root)

    def attempt(jid: str) -> None:  # the second run's switch, from the generation it saw serving
        switch(env["store"], root, old, new, embedder, jid, rollback=False)

    with pytest.raises(SwitchedAlready):
        attempt(job_id)
    with pytest.raises(RuntimeError, match="serving generation changed"):
        attempt("another-job")
    assert gens.read_pointer(root) == before
