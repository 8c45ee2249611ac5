"""`vela jobs` against a real server: list (a table, --json, its filters and --limit), show, wait (exit by how the
job ended: 0, 1, 130), cancel (a queued job; one that has ended is a conflict, 3), retry (a failed job; one that did
not fail is a conflict), and unknown jobs, a wrong key, a kind the server does not know: refused as given, 2.

Two server-side faults make the job states these need, as tests/client/test_jobs.py makes them: a gate that holds a
job in its commit (so the next one stays queued) and a commit that fails once (a failed job)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vela_client import VelaClient

from cli.main import main as vela
from tests import job_faults
from tests.cli.remote_server import API_KEY, NOTES, one_line, out_json, serving, table, use_server

gate, fail_once = job_faults.gate, job_faults.fail_once  # fixtures: faults injected into jobs by name


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("cli-jobs"), tiny_embedder_dir, notes=NOTES) as url:
        yield url


@pytest.fixture
def client(server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[VelaClient]:
    use_server(server, monkeypatch)
    with VelaClient(server, api_key=API_KEY) as c:
        yield c


def notes_job(client: VelaClient) -> str:
    [job] = client.list_jobs(collection="notes", kind="upsert", limit=1).jobs
    return job.id


def test_list_show_and_wait_for_a_job_that_succeeded(client: VelaClient, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = notes_job(client)
    assert vela(["jobs", "list"]) == 0
    rows = table(capsys)
    assert rows[0] == ["ID", "COLLECTION", "KIND", "STATUS", "PROGRESS", "CREATED"]
    [row] = [r for r in rows if r[0] == job_id]
    assert row[1:5] == ["notes", "upsert", "succeeded", f"{len(NOTES)}/{len(NOTES)}"] and len(row) == 7

    assert vela(["jobs", "list", "--collection", "notes", "--status", "queued", "succeeded", "--kind", "upsert"]) == 0
    assert [r[0] for r in table(capsys)[1:]] == [job_id]
    assert vela(["jobs", "list", "--collection", "notes", "--json"]) == 0
    [listed] = out_json(capsys)
    assert listed["id"] == job_id and listed["status"] == "succeeded" and listed["done"] == len(NOTES)
    assert vela(["jobs", "list", "--status", "failed", "--status", "cancelled", "--collection", "notes"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == "no jobs"
    assert vela(["jobs", "list", "--collection", "notes", "--status", "running", "--json"]) == 0
    assert out_json(capsys) == []

    assert vela(["jobs", "show", job_id]) == 0
    fields = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert fields["id"] == job_id and fields["collection"] == "notes" and fields["status"] == "succeeded"
    assert fields["progress"] == f"{len(NOTES)}/{len(NOTES)} (100%)" and fields["attempts"] == "1"
    assert '"embedded": 8' in fields["result"] and "finished" in fields and "error" not in fields
    assert vela(["jobs", "show", job_id, "--json"]) == 0
    shown = out_json(capsys)
    assert shown["id"] == job_id and shown["result"]["embedded"] == len(NOTES)

    assert vela(["jobs", "wait", job_id]) == 0  # ended already: at once, no bar
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"job {job_id} (upsert notes) succeeded: {len(NOTES)} documents (ran ")
    assert vela(["jobs", "wait", job_id, "--json"]) == 0
    assert out_json(capsys)["status"] == "succeeded"


def test_list_limit_says_there_are_more(client: VelaClient, capsys: pytest.CaptureFixture[str]) -> None:
    client.index("paged", NOTES[:1], wait=True)
    client.index("paged", NOTES[1:2], wait=True)
    assert vela(["jobs", "list", "--collection", "paged", "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2 and "more jobs than these 1: --limit N shows up to 1000" in err
    with pytest.raises(SystemExit) as usage:  # argparse: before any request
        vela(["jobs", "list", "--limit", "0"])
    assert usage.value.code == 2
    capsys.readouterr()


def test_cancel_a_queued_job_and_wait_for_it(
    client: VelaClient, gate: threading.Event, capsys: pytest.CaptureFixture[str]
) -> None:
    held = client.index("gated", NOTES[:2])
    behind = client.index("gated", NOTES[2:3])  # queued behind the held one
    assert vela(["jobs", "cancel", behind.job_id]) == 0
    assert capsys.readouterr().out.strip() == f"cancelled job {behind.job_id} (upsert gated)"
    assert vela(["jobs", "cancel", behind.job_id]) == 3
    assert "already ended (cancelled): nothing to cancel" in one_line(capsys)
    assert vela(["jobs", "wait", behind.job_id]) == 130
    assert f"vela jobs: job {behind.job_id} (upsert gated) cancelled" in one_line(capsys)
    assert vela(["jobs", "show", behind.job_id]) == 0
    assert "status      cancelled" in capsys.readouterr().out

    gate.set()
    assert vela(["jobs", "wait", held.job_id, "--json"]) == 0
    done = out_json(capsys)
    assert done["status"] == "succeeded" and done["done"] == 2
    assert vela(["jobs", "cancel", held.job_id]) == 3
    assert "already ended (succeeded)" in one_line(capsys)


def test_ctrl_c_while_waiting_leaves_the_job_as_it_is(
    client: VelaClient, gate: threading.Event, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    held = client.index("gated-ctrl-c", NOTES[:1])

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(VelaClient, "wait_job", interrupted)
        assert vela(["jobs", "wait", held.job_id]) == 130
    assert one_line(capsys) == f"vela jobs: stopped waiting; job {held.job_id} goes on (GET /jobs/{held.job_id})"
    assert client.get_job(held).status in ("queued", "running")
    gate.set()
    assert client.wait_job(held, timeout=60).succeeded


def test_retry_a_failed_job_then_wait_for_it(
    client: VelaClient, fail_once: None, capsys: pytest.CaptureFixture[str]
) -> None:
    accepted = client.index("flaky", NOTES[:1])
    assert vela(["jobs", "wait", accepted.job_id]) == 1
    err = one_line(capsys)
    assert f"job {accepted.job_id} (upsert flaky) failed: " in err and "No space left on device" in err
    assert vela(["jobs", "show", accepted.job_id]) == 0
    assert "No space left on device" in capsys.readouterr().out

    assert vela(["jobs", "retry", accepted.job_id]) == 0
    said = capsys.readouterr().out.strip()
    assert said == f"job {accepted.job_id} (upsert flaky) queued again: vela jobs wait {accepted.job_id} follows it"
    assert vela(["jobs", "wait", accepted.job_id]) == 0
    assert "succeeded: 1 documents" in capsys.readouterr().out
    assert client.get_job(accepted.job_id).attempts == 2
    assert vela(["jobs", "retry", accepted.job_id]) == 3  # it did not fail
    assert "conflict" in one_line(capsys)


@pytest.mark.parametrize("action", ["show", "cancel", "retry", "wait"])
def test_an_unknown_job_is_refused_as_given(
    client: VelaClient, action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert vela(["jobs", action, "no-such-job"]) == 2
    err = one_line(capsys)
    assert err.startswith("vela jobs: no job with id 'no-such-job'") and "job_not_found" in err


def test_refused_as_given(client: VelaClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["jobs", "list", "--api-key", "wrong"]) == 2
    assert "unauthorized" in one_line(capsys)
    assert vela(["jobs", "show", notes_job(client), "--api-key", "wrong"]) == 2
    assert "unauthorized" in one_line(capsys)
    for action in ("show", "cancel", "retry", "wait"):  # refused by the client before sending: as given too
        assert vela(["jobs", action, ""]) == 2
        err = one_line(capsys)
        assert "job_id must be a non-empty string" in err and "ValueError" not in err, err
    assert vela(["jobs", "list", "--kind", "upsert", "bogus"]) == 2  # the server's kinds, named by it
    assert "'upsert', 'delete'" in one_line(capsys)
    with pytest.raises(SystemExit) as usage:
        vela(["jobs", "list", "--status", "done"])
    assert usage.value.code == 2
    capsys.readouterr()
