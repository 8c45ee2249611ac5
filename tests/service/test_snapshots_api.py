"""Snapshots over real HTTP: take one, write more, restore it into a new name and get the hits, scores, counts,
documents and schema the source had when it was taken (sharded too, through an alias, after the source was
deleted, and uploaded as a download); names outside the listing, damaged tars, taken names and foreign models are
refused in the error shape, and touch nothing."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexing.merger import wait_background
from models.registry import ModelRegistry
from service.snapshot_uploads import SWEEP_LOCK
from tests.service.conftest import running_app
from tests.service.document_helpers import index, run_job, scroll_all
from tests.snapshot_corpus import SCHEMA, YEAR_FILTER, documents

DOCS = documents(24)
QUERIES = ["tides study", "volcano notes 5", "insulin", "graphene number 11"]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[tuple[httpx.Client, Path]]:
    data = tmp_path_factory.mktemp("snapshots") / "data"
    ModelRegistry(data / "models").register("tiny", tiny_embedder_dir)  # collections may name it: `tiny`
    with running_app(data, embedder=str(tiny_embedder_dir)) as (client, _):
        yield client, data


def _state(client: httpx.Client, name: str) -> dict[str, Any]:
    """What a client sees of a collection: every query's hits in each mode, counts, documents, schema."""
    out: dict[str, Any] = {}
    for mode in ("dense", "bm25", "hybrid"):
        for q in QUERIES:
            r = client.post("/search", json={"collection": name, "query": q, "mode": mode, "k": 5})
            assert r.status_code == 200, r.text
            out[f"{mode}:{q}"] = [(h["id"], h["score"]) for h in r.json()["hits"]]
    for body in ({}, {"filter": YEAR_FILTER}):
        out[f"count:{body}"] = client.post(f"/collections/{name}/count", json=body).json()["count"]
    docs, _ = scroll_all(client, name)
    out["documents"] = [(d["id"], d["title"], d["text"], d["metadata"]) for d in docs]
    coll = client.get(f"/collections/{name}").json()
    keys = ("documents", "passages", "embedder", "dims", "chunking", "shards", "schema", "fusion")
    out["collection"] = {k: coll[k] for k in keys}
    return out


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        if ":" in key and not key.startswith("count"):
            assert [i for i, _ in got[key]] == [i for i, _ in value], key
            assert [s for _, s in got[key]] == pytest.approx([s for _, s in value], abs=1e-6), key
        else:
            assert got[key] == value, key


def _snapshot(client: httpx.Client, name: str) -> dict[str, Any]:
    wait_background(60)  # merges and the fusion choice after an ingest settle first: the state recorded is final
    job = run_job(client, client.post(f"/collections/{name}/snapshots"))
    assert job["kind"] == "snapshot" and job["done"] == job["total"]
    return dict(job["result"])


def _restore(client: httpx.Client, name: str, snapshot: str, into: str, expect: str = "succeeded") -> dict[str, Any]:
    return run_job(
        client, client.post(f"/collections/{name}/snapshots/{snapshot}/restore", json={"into": into}), expect
    )


def _later_writes(client: httpx.Client, name: str) -> None:
    index(client, name, [{"id": "n1", "text": "tides study after", "metadata": {"topic": "tides", "year": 2040}}])
    run_job(client, client.delete(f"/collections/{name}/documents/d3"))
    run_job(client, client.patch(f"/collections/{name}/documents/d5", json={"metadata": {"year": 1900}}))


@pytest.mark.parametrize("shards", [1, 2], ids=["one-shard", "two-shards"])
def test_a_restore_answers_as_the_source_did_when_it_was_taken(app: tuple[httpx.Client, Path], shards: int) -> None:
    client, data = app
    source, copy = f"src{shards}", f"copy{shards}"
    index(client, source, DOCS, schema=SCHEMA, shards=shards)
    wait_background(60)
    before = _state(client, source)
    result = _snapshot(client, source)
    assert result["documents"] == len(DOCS) and result["snapshot"].startswith(f"{source}-")
    _later_writes(client, source)
    assert _state(client, source) != before

    job = _restore(client, source, result["snapshot"], copy)
    assert job["kind"] == "restore" and job["collection"] == copy and job["result"]["documents"] == len(DOCS)
    _same(_state(client, copy), before)
    assert client.get(f"/collections/{copy}").json()["schema"] == SCHEMA
    # A filter on a declared field works on the copy (the schema came along).
    r = client.post("/search", json={"collection": copy, "query": "tides", "filter": YEAR_FILTER, "k": 30})
    assert r.status_code == 200 and all(h["metadata"]["year"] >= 2010 for h in r.json()["hits"])
    listed = client.get(f"/collections/{source}/snapshots").json()["snapshots"]
    assert [s["name"] for s in listed] == [result["snapshot"]]
    assert listed[0]["sha256"] == result["sha256"] and listed[0]["bytes"] == result["bytes"]
    assert str(data) not in json.dumps(listed) and str(data) not in json.dumps(job)


def test_download_delete_and_a_listing_that_outlives_its_collection(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    index(client, "gone", DOCS[:6])
    first = _snapshot(client, "gone")["snapshot"]
    second = _snapshot(client, "gone")["snapshot"]
    listed = client.get("/collections/gone/snapshots").json()["snapshots"]
    assert [s["name"] for s in listed] == [second, first]  # newest first
    r = client.get(f"/collections/gone/snapshots/{first}")
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-tar"
    assert hashlib.sha256(r.content).hexdigest() == listed[1]["sha256"] and len(r.content) == listed[1]["bytes"]
    assert client.delete(f"/collections/gone/snapshots/{second}").status_code == 204
    assert client.delete(f"/collections/gone/snapshots/{second}").status_code == 404
    # Deleting the collection keeps its snapshots: listed, and restorable, under its name.
    assert client.delete("/collections/gone").status_code == 204
    assert [s["name"] for s in client.get("/collections/gone/snapshots").json()["snapshots"]] == [first]
    _restore(client, "gone", first, "back")
    assert client.get("/collections/back").json()["documents"] == 6
    # Its last snapshot deleted, the dropped collection leaves no folder behind; a live one keeps its own.
    folder = data / "snapshots" / "gone"
    assert folder.is_dir()
    assert client.delete(f"/collections/gone/snapshots/{first}").status_code == 204
    assert not folder.exists()
    assert client.get("/collections/gone/snapshots").status_code == 404
    kept = _snapshot(client, "back")["snapshot"]
    assert client.delete(f"/collections/back/snapshots/{kept}").status_code == 204
    assert (data / "snapshots" / "back").is_dir() and client.get("/collections/back/snapshots").json()[
        "snapshots"
    ] == []


def test_an_alias_snapshots_and_lists_its_target(app: tuple[httpx.Client, Path]) -> None:
    client, _ = app
    index(client, "target", DOCS[:4])
    assert client.put("/aliases/live", json={"collection": "target"}).status_code in (200, 201)
    name = _snapshot(client, "live")["snapshot"]
    assert name.startswith("target-")
    assert [s["name"] for s in client.get("/collections/live/snapshots").json()["snapshots"]] == [name]
    r = client.post(f"/collections/target/snapshots/{name}/restore", json={"into": "live"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"  # an alias's name is taken


def _error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code, r.text


def test_names_outside_the_listing_are_404_and_touch_nothing(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    index(client, "named", DOCS[:4])
    name = _snapshot(client, "named")["snapshot"]
    (data / "snapshots" / ".uploads").mkdir(exist_ok=True)
    before = sorted(p.relative_to(data) for p in data.rglob("*") if "snapshots" in p.parts)
    (data / "named-20200101T000000-abcdef.tar").write_bytes(b"not in the folder")
    bad = [
        "..%2F..%2Fjobs.sqlite3",
        "..%2Fnamed-20200101T000000-abcdef.tar",
        "named-20200101T000000-abcdef.tar",
        name.replace(".tar", ".json"),
        name.upper(),
        "%2E%2E",
        "jobs.sqlite3",
    ]
    for snapshot in bad:
        for method, suffix in (("GET", ""), ("DELETE", ""), ("POST", "/restore")):
            r = client.request(method, f"/collections/named/snapshots/{snapshot}{suffix}", json={"into": "x1"})
            assert r.status_code == 404, (method, snapshot, r.text)
            assert r.json()["error"]["code"] in ("snapshot_not_found", "not_found"), r.text
    _error(client.get("/collections/..%2F..%2Fjobs/snapshots"), 404, "not_found")
    _error(client.get("/collections/nothing/snapshots"), 404, "collection_not_found")
    _error(client.get("/collections/.uploads/snapshots"), 404, "collection_not_found")  # the server's own folder
    _error(client.post("/collections/nothing/snapshots"), 404, "collection_not_found")
    _error(client.get(f"/collections/nothing/snapshots/{name}"), 404, "collection_not_found")
    after = sorted(p.relative_to(data) for p in data.rglob("*") if "snapshots" in p.parts)
    assert after == before and (data / "jobs.sqlite3").is_file() and not client.get("/collections/x1").is_success


def test_a_restore_needs_a_new_valid_name(app: tuple[httpx.Client, Path]) -> None:
    client, _ = app
    index(client, "taken", DOCS[:4])
    name = _snapshot(client, "taken")["snapshot"]
    _error(client.post(f"/collections/taken/snapshots/{name}/restore", json={"into": "taken"}), 409, "conflict")
    for into in ("../evil", "", ".hidden", "a" * 65):
        r = client.post(f"/collections/taken/snapshots/{name}/restore", json={"into": into})
        _error(r, 422, "invalid_request")
    _error(client.post(f"/collections/taken/snapshots/{name}/restore", json={}), 422, "invalid_request")


def test_a_damaged_snapshot_fails_its_restore_and_leaves_no_collection(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    index(client, "fragile", DOCS[:8])
    name = _snapshot(client, "fragile")["snapshot"]
    path = data / "snapshots" / "fragile" / name
    with tarfile.open(path) as tar:
        member = tar.getmember("docs.sqlite3")
    raw = bytearray(path.read_bytes())
    raw[member.offset_data + member.size // 3] ^= 0x01
    path.write_bytes(bytes(raw))
    job = _restore(client, "fragile", name, "broken", expect="failed")
    assert "damaged" in job["error"] and str(data) not in job["error"]
    _error(client.get("/collections/broken"), 404, "collection_not_found")
    assert not [p for p in (data / "collections").iterdir() if p.name.startswith(".")]


def _uploads(data: Path) -> list[Path]:
    """Files in the uploads folder, less the sweep's lock file."""
    return [p for p in (data / "snapshots" / ".uploads").iterdir() if p.name != SWEEP_LOCK]


def _rewrite_manifest(tar_bytes: bytes, change: dict[str, Any]) -> bytes:
    """The same tar with snapshot.json changed (its members and their checksums as they were)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == "snapshot.json":
                manifest = json.loads(data)
                manifest["embedder"].update(change)
                data = json.dumps(manifest).encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return out.getvalue()


def test_an_uploaded_snapshot_is_restored_as_a_taken_one_is(app: tuple[httpx.Client, Path]) -> None:
    client, data = app
    index(client, "travel", DOCS, schema=SCHEMA, embedder="tiny")  # a registered model: restored by its name
    wait_background(60)
    before = _state(client, "travel")
    taken = _snapshot(client, "travel")
    body = client.get(f"/collections/travel/snapshots/{taken['snapshot']}").content
    headers = {"content-type": "application/x-tar"}
    r = client.post(
        "/snapshots/upload", params={"into": "moved", "sha256": taken["sha256"]}, content=body, headers=headers
    )
    job = run_job(client, r)
    assert job["kind"] == "restore" and job["collection"] == "moved"
    assert client.get("/collections/moved").json()["embedder"] == "tiny"
    _same(_state(client, "moved"), before)
    # Refused before anything is stored: a taken name, a body that is not a snapshot, a model this server lacks.
    _error(client.post("/snapshots/upload", params={"into": "moved"}, content=body), 409, "conflict")
    _error(client.post("/snapshots/upload", params={"into": "junk"}, content=b"x" * 2048), 422, "invalid_snapshot")
    foreign = _rewrite_manifest(body, {"name": "no-such-model"})
    _error(client.post("/snapshots/upload", params={"into": "foreign"}, content=foreign), 422, "unknown_model")
    path_like = _rewrite_manifest(body, {"name": "../../models/x", "folder_sha256": "0" * 64})
    _error(client.post("/snapshots/upload", params={"into": "foreign"}, content=path_like), 422, "unknown_model")
    # A checksum that is not the file's: the restore fails and makes nothing.
    job = run_job(
        client, client.post("/snapshots/upload", params={"into": "wrong", "sha256": "0" * 64}, content=body), "failed"
    )
    wrong = f"not the {'0' * 64} given with the upload: the file or the sha256 given is not the one meant"
    assert wrong in job["error"]
    for name in ("junk", "foreign", "wrong"):
        _error(client.get(f"/collections/{name}"), 404, "collection_not_found")
    assert _uploads(data) == []  # every upload went with its restore


def test_the_routes_are_documented_with_their_errors(app: tuple[httpx.Client, Path]) -> None:
    client, _ = app
    paths = client.get("/openapi.json").json()["paths"]
    ops = {
        ("/collections/{name}/snapshots", "post"): {"202", "404"},
        ("/collections/{name}/snapshots", "get"): {"200", "404"},
        ("/collections/{name}/snapshots/{snapshot}", "get"): {"200", "404"},
        ("/collections/{name}/snapshots/{snapshot}", "delete"): {"204", "404"},
        ("/collections/{name}/snapshots/{snapshot}/restore", "post"): {"202", "404", "409", "422"},
        ("/snapshots/upload", "post"): {"202", "409", "413", "422"},
    }
    for (path, method), codes in ops.items():
        assert codes <= set(paths[path][method]["responses"]), (path, method)
    download = paths["/collections/{name}/snapshots/{snapshot}"]["get"]["responses"]["200"]
    assert "application/x-tar" in download["content"]


def test_an_upload_is_bounded_by_the_request_limit(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_app(tmp_path / "data", embedder=str(tiny_embedder_dir), max_request_bytes=4096) as (client, _):
        index(client, "big", DOCS)
        body = client.get(f"/collections/big/snapshots/{_snapshot(client, 'big')['snapshot']}").content
        assert len(body) > 4096
        _error(client.post("/snapshots/upload", params={"into": "x"}, content=body), 413, "payload_too_large")

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
            for i in range(0, len(body), 1024):
                yield body[i : i + 1024]

        _error(client.post("/snapshots/upload", params={"into": "x"}, content=chunks()), 413, "payload_too_large")
        assert _uploads(tmp_path / "data") == []
        _error(client.get("/collections/x"), 404, "collection_not_found")
