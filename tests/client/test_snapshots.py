"""Snapshots through both clients against a real server: take one and wait, list it, download it (the server's own
bytes, checked against the listing's sha256), restore it into a new name and search that, upload the download into
another name, delete it. Unknown names and bad tars raise their typed errors; a download that does not match its
listing, or breaks off, leaves no file behind."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from vela_client import (
    ChecksumMismatch,
    ConnectionFailed,
    InvalidRequest,
    InvalidSnapshot,
    Job,
    JobFailed,
    NotFound,
    PayloadTooLarge,
    Snapshot,
    SnapshotNotFound,
    VelaClient,
)
from vela_client.models import Mode

from service.snapshot_schemas import SnapshotOut
from tests.client.conftest import API_KEY, FAST_RETRY, ClientFactory
from tests.service.conftest import running_app

TOPICS = ["tides", "volcano", "insulin", "graphene"]
DOCS = [{"id": f"d{i}", "text": f"{TOPICS[i % 4]} study {i}: notes on {TOPICS[i % 4]}"} for i in range(12)]
QUERIES = ["tides study", "volcano notes", "graphene"]
MAX_BODY = 1 << 20


@pytest.fixture(scope="module")
def snapshot_server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[tuple[str, Path]]:
    """A server of its own, so that the tests can read the tars it keeps: its URL and its snapshots folder. Its
    request bodies are bounded at MAX_BODY (the tars of these tests are far smaller)."""
    root = tmp_path_factory.mktemp("client-snapshots")
    settings = {
        "api_keys": API_KEY,
        "embedder": str(tiny_embedder_dir),
        "snapshots_dir": root / "snapshots",
        "max_request_bytes": MAX_BODY,
    }
    with running_app(root / "data", **settings) as (http, _):
        yield str(http.base_url), root / "snapshots"


def hits(client: VelaClient, name: str) -> list[list[tuple[str, float]]]:
    answers = []
    modes: tuple[Mode, ...] = ("bm25", "dense")
    for mode in modes:
        for query in QUERIES:
            found = client.search(name, query, mode=mode, k=5).hits
            answers.append([(h.id, round(h.score, 5)) for h in found])
    return answers


def test_snapshot_round_trip(
    make_client: ClientFactory, snapshot_server: tuple[str, Path], unique: Callable[[str], str], tmp_path: Path
) -> None:
    url, kept = snapshot_server
    client = make_client(url)
    name = unique("snap")
    client.index(name, DOCS, wait=True)
    seen: list[Job] = []
    job = client.create_snapshot(name, wait=True, on_progress=seen.append)
    assert job.kind == "snapshot" and job.succeeded and seen[-1] == job and job.result is not None
    made = job.result["snapshot"]

    [listed] = client.list_snapshots(name)
    assert isinstance(listed, Snapshot)
    assert (listed.name, listed.collection, listed.documents) == (made, name, len(DOCS))
    assert listed.sha256 == job.result["sha256"]

    path = client.download_snapshot(name, made, tmp_path / "copy.tar")
    assert path == tmp_path / "copy.tar"
    assert path.read_bytes() == (kept / name / made).read_bytes()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == listed.sha256 and path.stat().st_size == listed.bytes
    assert client.download_snapshot(name, made, tmp_path) == tmp_path / made  # a folder: under its own name
    # written as a folder that is not there: made (with its parents), the tar under its own name inside
    assert client.download_snapshot(name, made, f"{tmp_path / 'new' / 'absent'}/") == tmp_path / "new" / "absent" / made
    assert [p.name for p in (tmp_path / "new" / "absent").iterdir()] == [made]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["copy.tar", made, "new"])  # no temporary file left

    restored = unique("restored")
    job = client.restore_snapshot(name, made, into=restored, wait=True)
    assert job.kind == "restore" and job.succeeded
    assert client.count(restored) == len(DOCS) and hits(client, restored) == hits(client, name)

    uploaded = unique("uploaded")
    job = client.upload_snapshot(path, into=uploaded, wait=True)  # its sha256 computed by the client
    assert job.succeeded and hits(client, uploaded) == hits(client, name)
    given = unique("given")
    accepted = client.upload_snapshot(str(path), into=given, sha256=listed.sha256)
    assert client.wait_job(accepted).succeeded and client.count(given) == len(DOCS)
    with pytest.raises(JobFailed):  # the server checks the tar against the sha256 it is given
        client.upload_snapshot(path, into=unique("damaged"), sha256="0" * 64, wait=True)

    client.delete_snapshot(name, made)
    assert client.list_snapshots(name) == []
    assert not (kept / name / made).exists()
    with pytest.raises(SnapshotNotFound):
        client.delete_snapshot(name, made)


def test_unknown_names_and_bad_tars_raise_typed_errors(
    make_client: ClientFactory, snapshot_server: tuple[str, Path], unique: Callable[[str], str], tmp_path: Path
) -> None:
    client = make_client(snapshot_server[0])
    name = unique("errors")
    client.index(name, DOCS[:2], wait=True)
    never_made = f"{name}-20250101T000000-abcdef.tar"
    attempts: list[Callable[[], object]] = [
        lambda: client.download_snapshot(name, never_made, tmp_path / "x.tar"),
        lambda: client.delete_snapshot(name, never_made),
        lambda: client.restore_snapshot(name, "notes.tar", into=unique("never")),
    ]
    for attempt in attempts:
        with pytest.raises(SnapshotNotFound) as raised:
            attempt()
        assert isinstance(raised.value, NotFound)
        assert (raised.value.code, raised.value.status) == ("snapshot_not_found", 404)
    with pytest.raises(NotFound) as missing:
        client.create_snapshot(unique("missing"))
    assert missing.value.code == "collection_not_found" and not isinstance(missing.value, SnapshotNotFound)

    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar at all " * 64)
    with pytest.raises(InvalidSnapshot) as invalid:
        client.upload_snapshot(junk, into=unique("junk"))
    assert isinstance(invalid.value, InvalidRequest) and invalid.value.code == "invalid_snapshot"
    huge = tmp_path / "huge.tar"
    huge.write_bytes(bytes(2 * MAX_BODY))
    with pytest.raises(PayloadTooLarge):  # refused by the length sent first
        client.upload_snapshot(huge, into=unique("huge"), sha256="0" * 64)
    huge.unlink()

    # Waiting options that cannot apply are refused before anything is sent: no snapshot is taken.
    with pytest.raises(ValueError):
        client.create_snapshot(name, timeout=5)  # type: ignore[call-overload]
    with pytest.raises(ValueError):
        client.upload_snapshot(junk, into=unique("never"), on_progress=print)  # type: ignore[call-overload]
    assert client.list_snapshots(name) == [] and [p.name for p in tmp_path.iterdir()] == ["junk.tar"]


def test_a_download_that_does_not_match_the_listing_leaves_no_file(
    make_client: ClientFactory, snapshot_server: tuple[str, Path], unique: Callable[[str], str], tmp_path: Path
) -> None:
    url, kept = snapshot_server
    client = make_client(url)
    name = unique("damaged")
    client.index(name, DOCS[:3], wait=True)
    made = client.create_snapshot(name, wait=True).result["snapshot"]  # type: ignore[index]
    tar = kept / name / made
    damaged = bytearray(tar.read_bytes())
    damaged[-1] ^= 0xFF  # the same size, in the tar's end padding: only its sha256 tells
    tar.write_bytes(bytes(damaged))
    with pytest.raises(ChecksumMismatch) as raised:
        client.download_snapshot(name, made, tmp_path / "copy.tar")
    assert raised.value.code == "sha256_mismatch"
    assert list(tmp_path.iterdir()) == []


# A snapshot as a server that cuts its answers short would list and send it.
PAYLOAD = bytes(range(256)) * 4096  # 1 MiB
LISTED = Snapshot(
    name="notes-20250101T000000-abcdef.tar",
    collection="notes",
    created_at=0.0,
    bytes=len(PAYLOAD),
    documents=1,
    passages=1,
    sha256=hashlib.sha256(PAYLOAD).hexdigest(),
)


@pytest.fixture
def cutting_server() -> Iterator[tuple[str, list[bool]]]:
    """Lists LISTED and sends its tar, whole or cut off halfway (then the connection is closed), as `plan` says,
    one try after another (the last entry repeats). Yields its URL and the plan."""
    plan: list[bool] = []  # True: cut this try short
    tries = iter(range(1 << 30))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            listing = self.path.endswith("/snapshots")
            body = json.dumps({"snapshots": [LISTED.model_dump()]}).encode() if listing else PAYLOAD
            cut = not listing and plan[min(next(tries), len(plan) - 1)]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2] if cut else body)
            self.close_connection = cut

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", plan
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_broken_download_starts_over_and_one_that_never_completes_leaves_no_file(
    make_client: ClientFactory, cutting_server: tuple[str, list[bool]], tmp_path: Path
) -> None:
    url, plan = cutting_server
    client = make_client(url, retry=FAST_RETRY)
    plan[:] = [True, False]  # the first try breaks halfway, the second is whole
    path = client.download_snapshot("notes", LISTED.name, tmp_path / "notes.tar")
    assert path.read_bytes() == PAYLOAD and [p.name for p in tmp_path.iterdir()] == ["notes.tar"]

    plan[:] = [True]  # every try breaks
    with pytest.raises(ConnectionFailed):
        client.download_snapshot("notes", LISTED.name, tmp_path / "again.tar")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.tar"]


def test_the_snapshot_model_has_every_field_the_listing_has() -> None:
    assert set(SnapshotOut.model_fields) - set(Snapshot.model_fields) == set()
