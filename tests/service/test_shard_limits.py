"""Shards are capped, per collection and for the whole data directory, since every shard keeps files open for as
long as the server runs: past a cap, a new collection is refused (409 limit_exceeded, or 422 for a collection's
own count) with nothing made, and GET /limits shows the caps and the shards held."""

from __future__ import annotations

import errno
import json
from pathlib import Path

from indexing.shard_budget import FDS_PER_SHARD, FDS_RESERVED, MAX_SHARDS_PER_COLLECTION, MIN_SHARD_CAP, shard_cap
from service.errors import internal_error
from tests.service.conftest import error_body, running_app, wait_job

DOCS = [{"id": f"d{i}", "text": f"word{i} alpha beta"} for i in range(6)]


def test_new_collections_stop_at_the_shard_cap(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_app(tmp_path, embedder=str(tiny_embedder_dir), max_shards=5) as (client, _):
        limits = client.get("/limits").json()
        assert (limits["max_shards"], limits["max_shards_per_collection"], limits["shards"]) == (5, 64, 0)

        r = client.post("/index", json={"collection": "three", "shards": 3, "documents": DOCS})
        assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"

        r = client.post("/index", json={"collection": "more", "shards": 3, "documents": DOCS})
        assert r.status_code == 409, r.text
        error = error_body(r)
        assert error["code"] == "limit_exceeded"
        assert "the limit is 5 shards (VELA_MAX_SHARDS)" in error["message"]
        assert "3 shard(s) to the 3 this data directory holds" in error["message"]
        assert client.get("/collections/more").status_code == 404  # nothing half made
        assert sorted(p.name for p in (tmp_path / "collections").iterdir()) == ["three"]

        # What is already stored is served and written to as before; a collection that fits is made.
        r = client.post("/index", json={"collection": "three", "documents": [{"id": "x", "text": "gamma"}]})
        assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        r = client.post("/index", json={"collection": "two", "shards": 2, "documents": DOCS})
        assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        assert client.get("/limits").json()["shards"] == 5
        r = client.post("/index", json={"collection": "one", "documents": DOCS})
        assert r.status_code == 409 and error_body(r)["code"] == "limit_exceeded"

        # A deleted collection gives its shards back.
        assert client.delete("/collections/two").status_code == 204
        r = client.post("/index", json={"collection": "one", "documents": DOCS})
        assert r.status_code == 202, r.text


def test_a_collection_has_at_most_64_shards(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_app(tmp_path, embedder=str(tiny_embedder_dir)) as (client, _):
        r = client.post("/index", json={"collection": "wide", "shards": 65, "documents": DOCS})
        assert r.status_code == 422, r.text
        assert "shards: Input should be less than or equal to 64" in error_body(r)["message"]
        assert not (tmp_path / "collections" / "wide").exists()
    assert MAX_SHARDS_PER_COLLECTION == 64


def test_the_cap_is_lowered_to_what_the_open_files_limit_holds() -> None:
    sockets = 1024
    assert shard_cap(1024, "VELA_MAX_SHARDS", 1_048_576, sockets).limit == 1024
    fitting = shard_cap(1024, "VELA_MAX_SHARDS", 20_000, sockets)
    assert fitting.limit == (20_000 - sockets - FDS_RESERVED) // FDS_PER_SHARD
    assert "open-files limit of 20000" in fitting.source
    assert shard_cap(1024, "VELA_MAX_SHARDS", 1024, sockets).limit == MIN_SHARD_CAP  # the worst case: a floor
    assert shard_cap(4, "VELA_MAX_SHARDS", 1024, sockets).limit == 4  # the setting below the floor holds
    assert shard_cap(1024, "VELA_MAX_SHARDS", None, sockets).limit == 1024  # a platform without the limit


def test_running_out_of_file_handles_is_a_503_in_the_error_shape() -> None:
    r = internal_error(OSError(errno.EMFILE, "Too many open files"))
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"
    assert json.loads(r.body)["error"]["code"] == "unavailable"
    wrapped = RuntimeError("search failed")
    wrapped.__cause__ = OSError(errno.ENFILE, "Too many open files in system")
    assert internal_error(wrapped).status_code == 503
    assert internal_error(ValueError("a bug")).status_code == 500
