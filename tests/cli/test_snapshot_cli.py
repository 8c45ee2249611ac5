"""`vela snapshot` against a real server: create (waiting, and --no-wait), list (a table, --json), download (to the
snapshot's name here, and to --out), restore, upload (with and without --sha256), delete. Failures are one line on
stderr with an exit status that says which kind: 2 refused as given, 3 a conflict, 1 no answer or a failed job."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vela_client import VelaClient

from cli.main import main as vela
from tests.service.conftest import running_app

API_KEY = "cli-snapshot-key"
DOCS = [{"id": f"d{i}", "text": f"tides and the moon, note {i}"} for i in range(8)]
READ_KEY = "read-only-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[tuple[str, Path]]:
    """A server with keys on, holding the collection `notes`: its URL and its snapshots folder."""
    root = tmp_path_factory.mktemp("cli-snapshots")
    settings = {
        "api_keys": API_KEY,
        "read_api_keys": READ_KEY,
        "embedder": str(tiny_embedder_dir),
        "snapshots_dir": root / "snapshots",
    }
    with running_app(root / "data", **settings) as (http, _):
        url = str(http.base_url)
        with VelaClient(url, api_key=API_KEY) as client:
            client.index("notes", DOCS, wait=True)
        yield url, root / "snapshots"


@pytest.fixture
def env(server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The server through VELA_URL and VELA_API_KEY, as the flags' defaults; the current folder a fresh one."""
    monkeypatch.setenv("VELA_URL", server[0])
    monkeypatch.setenv("VELA_API_KEY", API_KEY)
    monkeypatch.chdir(tmp_path)
    return server[0]


def last_json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def created(capsys: pytest.CaptureFixture[str]) -> str:
    assert vela(["snapshot", "create", "notes"]) == 0
    done = last_json(capsys)
    assert done["status"] == "succeeded" and done["result"]["documents"] == len(DOCS)
    return str(done["result"]["snapshot"])


def test_create_list_download_restore_upload_delete(
    env: str, server: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = created(capsys)

    assert vela(["snapshot", "list", "notes"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["NAME", "CREATED", "SIZE", "DOCUMENTS", "PASSAGES"]
    assert table[1].startswith(name) and table[1].split()[-2:] == [str(len(DOCS)), str(len(DOCS))]
    assert vela(["snapshot", "list", "notes", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["name"] == name and listed["collection"] == "notes"

    assert vela(["snapshot", "download", "notes", name]) == 0  # to its own name, in the current folder
    assert capsys.readouterr().out.strip() == name
    kept = (server[1] / "notes" / name).read_bytes()
    assert (tmp_path / name).read_bytes() == kept and hashlib.sha256(kept).hexdigest() == listed["sha256"]
    assert vela(["snapshot", "download", "notes", name, "--out", "copy.tar"]) == 0
    assert (tmp_path / "copy.tar").read_bytes() == kept

    assert vela(["snapshot", "restore", "notes", name, "--into", "notes-restored"]) == 0
    assert last_json(capsys)["status"] == "succeeded"
    assert vela(["snapshot", "upload", "copy.tar", "--into", "notes-uploaded"]) == 0
    assert last_json(capsys)["status"] == "succeeded"
    checked = ["snapshot", "upload", "copy.tar", "--into", "notes-checked", "--sha256", listed["sha256"].upper()]
    assert vela(checked) == 0
    assert last_json(capsys)["status"] == "succeeded"
    with VelaClient(env, api_key=API_KEY) as client:
        source = [h.id for h in client.search("notes", "tides moon", mode="bm25", k=3).hits]
        for restored in ("notes-restored", "notes-uploaded", "notes-checked"):
            assert client.count(restored) == len(DOCS)
            assert [h.id for h in client.search(restored, "tides moon", mode="bm25", k=3).hits] == source

    # A tar that does not hash to the given sha256: its restore job fails, and the command says so.
    assert vela(["snapshot", "upload", "copy.tar", "--into", "notes-bad", "--sha256", "0" * 64]) == 1
    assert last_json(capsys)["status"] == "failed"

    assert vela(["snapshot", "delete", "notes", name]) == 0
    assert capsys.readouterr().out.strip() == f"deleted {name}"
    assert vela(["snapshot", "list", "notes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_no_wait_prints_the_accepted_job(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["snapshot", "create", "notes", "--no-wait"]) == 0
    accepted = last_json(capsys)
    assert accepted["status"] == "queued" and accepted["url"].endswith(f"/jobs/{accepted['job_id']}")
    with VelaClient(env, api_key=API_KEY) as client:
        done = client.wait_job(accepted["job_id"])
        client.delete_snapshot("notes", done.result["snapshot"])  # type: ignore[index]


def test_failures_are_one_line_with_an_exit_status_by_kind(
    env: str, server: tuple[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    never_made = "notes-20250101T000000-abcdef.tar"
    assert vela(["snapshot", "download", "notes", never_made]) == 2
    assert "snapshot_not_found" in one_line(capsys)
    assert not Path(never_made).exists()
    assert vela(["snapshot", "delete", "notes", never_made]) == 2
    assert "snapshot_not_found" in one_line(capsys)
    assert vela(["snapshot", "create", "missing"]) == 2
    assert "collection_not_found" in one_line(capsys)
    assert vela(["snapshot", "upload", "absent.tar", "--into", "x"]) == 2
    assert "no file absent.tar" in one_line(capsys)
    Path("junk.tar").write_bytes(b"not a tar " * 50)
    assert vela(["snapshot", "upload", "junk.tar", "--into", "junk"]) == 2
    assert "invalid_snapshot" in one_line(capsys)

    name = created(capsys)
    assert vela(["snapshot", "restore", "notes", name, "--into", "notes"]) == 3  # taken
    assert "conflict" in one_line(capsys)
    assert vela(["snapshot", "delete", "notes", name]) == 0
    capsys.readouterr()

    assert vela(["snapshot", "list", "notes", "--api-key", "wrong"]) == 2
    assert "unauthorized" in one_line(capsys)
    assert vela(["snapshot", "create", "notes", "--api-key", READ_KEY]) == 2  # a key that may only read
    assert "forbidden" in one_line(capsys)
    monkeypatch.delenv("VELA_API_KEY")
    assert vela(["snapshot", "list", "notes"]) == 2
    assert "unauthorized" in one_line(capsys)
    assert vela(["snapshot", "list", "notes", "--url", server[0], "--api-key", API_KEY]) == 0
    capsys.readouterr()

    with pytest.raises(SystemExit) as usage:  # argparse refuses it before anything is sent
        vela(["snapshot", "upload", "junk.tar", "--into", "x", "--sha256", "abc"])
    assert usage.value.code == 2
    capsys.readouterr()


def test_no_server_is_one_line_and_status_1(
    monkeypatch: pytest.MonkeyPatch, unused_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VELA_API_KEY", raising=False)
    assert vela(["snapshot", "list", "notes", "--url", unused_url]) == 1
    err = one_line(capsys)
    assert f"no Vela server answers at {unused_url}" in err and "connection_failed" in err


def test_an_address_without_its_scheme_is_refused_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["snapshot", "list", "notes", "--url", "127.0.0.1:8000"]) == 2
    assert "--url: '127.0.0.1:8000' is not an http:// or https:// URL" in one_line(capsys)


@pytest.fixture
def unused_url() -> str:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"
