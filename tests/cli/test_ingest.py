"""`vela ingest` without Ray: a JSONL file into a new sharded collection, recorded as a job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from indexing.jobs import JobStore
from indexing.store import CollectionStore


def test_ingest_jsonl_into_a_sharded_collection(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "docs.jsonl"
    docs = [{"id": f"d{i}", "title": f"t{i}", "text": f"text {i} about tides", "metadata": {"i": i}} for i in range(25)]
    data.write_text("\n".join(json.dumps(d) for d in docs))
    vela = tmp_path / "vela"
    base = ["ingest", "--data", str(data), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]
    assert main([*base, "--collection", "notes", "--shards", "2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "succeeded" and printed["stats"]["shards"] == 2
    job = JobStore(vela / "jobs.sqlite3").get(printed["job_id"])
    assert (job.status, job.done, job.total) == ("succeeded", 25, 25)
    coll = CollectionStore(vela).get("notes")
    assert coll.settings.shards == 2 and coll.stats()["documents"] == 25
    # --ray needs a sharded collection: an unsharded one is refused before anything is queued.
    assert main([*base, "--collection", "flat", "--ray", "127.0.0.1:1"]) == 2
    assert "--ray needs a sharded collection" in capsys.readouterr().err
