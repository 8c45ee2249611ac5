"""What a reindex request leaves out, and what is refused while one runs: a partial `chunking` keeps the serving
generation's other field, a promote sent during a reindex names the unfinished job, as a rollback does, and a switch
counts no documents."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import indexing.gen_sync
from cli.main import main as vela
from models.registry import ModelRegistry
from tests.service.conftest import error_body, running_app, wait_job

DOCS = [{"id": f"d{i}", "text": f"tides study {i}: the moon pulls the sea, and the shore answers"} for i in range(8)]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    data = tmp_path_factory.mktemp("reindex-options") / "data"
    ModelRegistry(data / "models").register("tiny", tiny_embedder_dir)
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        yield client


def _collection(client: httpx.Client, name: str) -> None:
    r = client.post("/index", json={"collection": name, "documents": DOCS})
    assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"


def _reindex(client: httpx.Client, name: str, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post(f"/collections/{name}/reindex", json={"embedder": "tiny", **body})
    assert r.status_code == 202, r.text
    return wait_job(client, r.json()["job_id"])


def test_a_partial_chunking_keeps_the_serving_generations_other_field(client: httpx.Client) -> None:
    _collection(client, "parts")
    assert _reindex(client, "parts", {"chunking": {"max_tokens": 16, "overlap": 8}})["status"] == "succeeded"
    assert client.get("/collections/parts").json()["chunking"] == {"max_tokens": 16, "overlap": 8}
    # The overlap left out is the serving generation's 8, not the server's default 32.
    assert _reindex(client, "parts", {"chunking": {"max_tokens": 64}})["status"] == "succeeded"
    assert client.get("/collections/parts").json()["chunking"] == {"max_tokens": 64, "overlap": 8}
    assert _reindex(client, "parts", {"chunking": {"overlap": 20}})["status"] == "succeeded"
    assert client.get("/collections/parts").json()["chunking"] == {"max_tokens": 64, "overlap": 20}
    # An overlap that does not fit the new max_tokens is refused, not changed behind the request's back.
    r = client.post("/collections/parts/reindex", json={"embedder": "tiny", "chunking": {"max_tokens": 32}})
    err = error_body(r)
    assert r.status_code == 422 and err["code"] == "invalid_request", r.text
    assert err["message"] == (
        "chunking.overlap 20 is more than half of chunking.max_tokens 32 "
        "(chunking.overlap is the serving generation's): give both"
    )
    assert client.get("/collections/parts").json()["chunking"] == {"max_tokens": 64, "overlap": 20}


def test_a_promote_during_a_reindex_names_the_job(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rollback said which job was unfinished; promote said there was nothing to promote, as if none ran."""
    _collection(client, "busy")
    release, started = threading.Event(), threading.Event()
    real = indexing.gen_sync.prepare_documents

    def held(*args: Any, **kwargs: Any) -> Any:  # the reindex stays running until the test lets it go
        started.set()
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(indexing.gen_sync, "prepare_documents", held)
    r = client.post("/collections/busy/reindex", json={"embedder": "tiny", "reencode": True})
    assert r.status_code == 202, r.text
    job = r.json()["job_id"]
    try:
        assert started.wait(60)
        for switch in ("promote", "rollback"):
            refused = client.post(f"/collections/busy/{switch}")
            err = error_body(refused)
            assert refused.status_code == 409 and err["code"] == "conflict", refused.text
            assert f"has a reindex job ({job}) not finished yet" in err["message"], err
    finally:
        release.set()
    assert wait_job(client, job)["status"] == "succeeded"


def test_a_switch_counts_no_documents(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A promotion or a rollback counts none: it showed 1/1 done, with a speed in documents per second, and `vela jobs
    wait` said it succeeded with "1 documents"."""
    _collection(client, "switched")
    assert _reindex(client, "switched", {"reencode": True})["status"] == "succeeded"
    r = client.post("/collections/switched/rollback")
    assert r.status_code == 202, r.text
    queued = client.get(f"/jobs/{r.json()['job_id']}").json()
    assert queued["done"] == queued["total"] == 0, queued
    job = wait_job(client, r.json()["job_id"])
    assert job["status"] == "succeeded" and job["kind"] == "rollback"
    assert job["done"] == job["total"] == 0 and job["docs_per_s"] is None and job["eta_s"] is None, job
    monkeypatch.setenv("VELA_URL", str(client.base_url))
    monkeypatch.delenv("VELA_API_KEY", raising=False)
    capsys.readouterr()
    assert vela(["jobs", "wait", job["id"]]) == 0
    assert re.fullmatch(
        rf"job {job['id']} \(rollback switched\) succeeded \(ran \d+\.\d s\)\n", capsys.readouterr().out
    )
    assert vela(["jobs", "show", job["id"]]) == 0
    fields = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert fields["progress"] == "-" and "speed" not in fields, fields
