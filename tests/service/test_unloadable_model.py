"""A registered model that does not load (a folder put in the registry by hand, with no weights): a request naming it
gets 422 invalid_model, never a 500, and no answer (a job's error included) shows a server path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexing.jobs import without_paths
from models.registry import ModelRegistry
from tests.service.conftest import running_app, wait_job

DOC = {"id": "d1", "text": "tides and the moon"}


def test_a_model_without_weights_is_a_422_and_a_failed_reindex_shows_no_path(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    data = tmp_path / "data"
    hollow = ModelRegistry(data / "models").root / "hollow"
    hollow.mkdir(parents=True)
    (hollow / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 16}))
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        r = client.post("/index", json={"collection": "new", "embedder": "hollow", "documents": [DOC]})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_model", r.text
        assert str(tmp_path) not in r.text and "hollow" in r.json()["error"]["message"]
        assert client.get("/collections/new").status_code == 404
        r = client.post("/index", json={"collection": "c", "documents": [DOC]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        r = client.post("/collections/c/reindex", json={"embedder": "hollow"})
        job = wait_job(client, r.json()["job_id"])
        assert job["status"] == "failed" and str(tmp_path) not in job["error"], job


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        ("OSError: no file named model.safetensors found in directory /srv/vela/models/x.", "directory .../x."),
        ("[Errno 28] No space left on device: '/srv/vela/collections/c/docs.sqlite3'", "'.../docs.sqlite3'"),
        ("see http://host/a/b", "see http://host/a/b"),  # a URL is not a server path
        ("relative/path/kept", "relative/path/kept"),
    ],
)
def test_job_errors_cut_absolute_paths(error: str, shown: str) -> None:
    assert shown in (without_paths(error) or "")


def test_damaged_weights_are_a_422_and_a_model_forced_out_a_409_for_dense_search(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    """Weights damaged after registration raised what the loader raises of its own (a SafetensorError, a 500);
    a model removed with `vela models remove --force` made the dense and hybrid searches of its collections 500s."""
    data = tmp_path / "data"
    registry = ModelRegistry(data / "models")
    damaged, kept = registry.register("damaged", tiny_embedder_dir), registry.register("kept", tiny_embedder_dir)
    assert damaged.path is not None and kept.path is not None
    (damaged.path / "model.safetensors").write_bytes(b"garbage")
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        r = client.post("/index", json={"collection": "new", "embedder": "damaged", "documents": [DOC]})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_model", r.text
        r = client.post("/index", json={"collection": "c", "embedder": "kept", "documents": [DOC]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    registry.remove("kept")  # what --force does once it has decided: the collection still names the folder
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):  # a restart: nothing holds it loaded
        assert client.get("/collections/c").json()["embedder"] == "unregistered"
        for mode in ("dense", "hybrid"):
            r = client.post("/search", json={"collection": "c", "query": "moon", "mode": mode})
            assert r.status_code == 409 and r.json()["error"]["code"] == "model_unavailable", r.text
            assert str(tmp_path) not in r.text
            assert "'kept', no longer in the registry" in r.json()["error"]["message"]  # the name to register again
        r = client.post("/search", json={"collection": "c", "query": "moon", "mode": "bm25"})
        assert r.status_code == 200 and r.json()["hits"][0]["id"] == "d1"
        # A write that could only fail its job after a 202 is refused up front, queuing nothing.
        jobs = client.get("/jobs").json()
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "d2", "text": "more tides"}]})
        assert r.status_code == 409 and r.json()["error"]["code"] == "model_unavailable", r.text
        assert "'kept'" in r.json()["error"]["message"] and str(tmp_path) not in r.text
        assert client.get("/jobs").json() == jobs
        for method, path, body in (  # every write job runs the collection's writer, which loads its model
            ("PATCH", "/collections/c/documents/d1", {"metadata": {"k": 1}}),
            ("POST", "/collections/c/delete", {"ids": ["d1"]}),
            ("PUT", "/collections/c/schema", {"fields": {"k": "integer"}}),
        ):
            r = client.request(method, path, json=body)
            assert r.status_code == 409 and r.json()["error"]["code"] == "model_unavailable", (path, r.text)
        r = client.delete("/collections/c/documents/d1")
        assert r.status_code == 409 and r.json()["error"]["code"] == "model_unavailable", r.text
        assert client.get("/jobs").json() == jobs


def test_a_rollback_to_a_generation_whose_model_is_gone_is_refused_before_anything_is_queued(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The rollback ran (the server still held the model loaded, or the CLI failed it with a raw FileNotFoundError),
    # leaving a collection served by a generation whose model does not load, or a failed job.
    from cli.main import main

    data = tmp_path / "data"
    registry = ModelRegistry(data / "models")
    registry.register("first", tiny_embedder_dir)
    registry.register("second", tiny_embedder_dir)
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        r = client.post("/index", json={"collection": "c", "embedder": "first", "documents": [DOC]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        r = client.post("/collections/c/reindex", json={"embedder": "second"})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        registry.remove("first")  # what --force does: the generation kept for rollback still names it
        r = client.post("/collections/c/rollback")  # a server that had the model's path in hand refuses it too
        assert r.status_code == 409 and r.json()["error"]["code"] == "model_unavailable", r.text
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        jobs = client.get("/jobs").json()
        r = client.post("/collections/c/rollback")
        assert r.status_code == 409 and r.json()["error"]["code"] == "model_unavailable", r.text
        assert "'first', no longer in the registry" in r.json()["error"]["message"] and str(tmp_path) not in r.text
        assert client.get("/jobs").json() == jobs
        assert client.get("/collections/c").json()["embedder"] == "second"  # still served as it was
    capsys.readouterr()  # what the servers printed (the library's loading bars)
    assert main(["reindex", "c", "--rollback", "--data-dir", str(data)]) == 2  # a precondition, said in one line
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("vela reindex: the collection's model ('first'"), err
