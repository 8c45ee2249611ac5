"""A data directory moved to another path carries its model registry (`<data dir>/models`) with it: collections of
registered models are served by the moved folders, shown by their registered names, and dense search answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from indexing.collection_settings import SETTINGS_FILE, load_settings
from models.registry import ModelRegistry
from tests.service.conftest import running_app, wait_job

DOCS = [{"id": "tides", "text": "tides and the moon"}, {"id": "rust", "text": "iron rusts in water"}]


def _ingest_with_registered_model(data: Path, tiny_embedder_dir: Path) -> list[str]:
    ModelRegistry(data / "models").register("tiny", tiny_embedder_dir)
    with running_app(data) as (client, _):
        r = client.post("/index", json={"collection": "c", "embedder": "tiny", "documents": DOCS})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded", r.text
        assert client.get("/collections/c").json()["embedder"] == "tiny"
        r = client.post("/search", json={"collection": "c", "query": "moon", "mode": "dense"})
        return [h["id"] for h in r.json()["hits"]]


def test_a_moved_data_dir_serves_its_registered_models(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    old, new = tmp_path / "old" / "data", tmp_path / "new" / "data"
    before = _ingest_with_registered_model(old, tiny_embedder_dir)
    shutil.move(old, new)
    recorded = json.loads((new / "collections" / "c" / SETTINGS_FILE).read_text())["embedder"]
    assert recorded == str(old / "models" / "tiny")  # the file is not rewritten: the path is mapped when read
    assert load_settings(new / "collections" / "c").embedder == str((new / "models" / "tiny").resolve())
    with running_app(new) as (client, _):
        assert client.get("/collections/c").json()["embedder"] == "tiny"
        r = client.post("/search", json={"collection": "c", "query": "moon", "mode": "dense"})
        assert r.status_code == 200 and [h["id"] for h in r.json()["hits"]] == before, r.text
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "sun", "text": "the sun"}]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    assert not old.exists()


def test_a_copied_data_dir_keeps_using_the_folder_still_on_disk(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    old, copy = tmp_path / "old" / "data", tmp_path / "copy" / "data"
    _ingest_with_registered_model(old, tiny_embedder_dir)
    shutil.copytree(old, copy)
    assert load_settings(copy / "collections" / "c").embedder == str(old / "models" / "tiny")
