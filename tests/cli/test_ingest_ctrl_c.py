"""Ctrl-C in a real `vela ingest` process while a batch, or the background work after the jobs, is inside a long
native call (tests/cli/hanging_ingest.py): the signals are handled at once, not when the call returns, and whatever
SIGINT handler the process inherited (it starts with SIGINT ignored, as a background job of a shell does)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.main import main
from indexing.jobs import JobStore
from indexing.store import CollectionStore

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 120  # how long a step may take on a loaded machine before the test gives up on it (never reached)


def _args(tmp_path: Path, tiny_embedder_dir: Path, n: int = 20) -> list[str]:
    data = tmp_path / "docs.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"d{i:02d}", "text": f"text {i} about tides"}) for i in range(n)))
    vela = tmp_path / "vela"
    return ["ingest", "--data", str(data), "--data-dir", str(vela), "--embedder", str(tiny_embedder_dir)]


class Ingest:
    """`vela ingest` in a subprocess whose `mode` step hangs; stderr goes to a file the test reads as it grows."""

    def __init__(self, tmp_path: Path, mode: str, args: list[str]) -> None:
        self.marker, self.err_path = tmp_path / "hanging", tmp_path / "stderr"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "VELA_INGEST_BATCH_SIZE": "5", "HF_HUB_OFFLINE": "1"}
        with self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.cli.hanging_ingest", mode, str(self.marker), *args],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
            )

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_for(self, what: str) -> None:
        """Until the marker exists (what="hang") or stderr shows `what`; fails if the process ends first."""
        deadline = time.monotonic() + WAIT_S
        while not (self.marker.exists() if what == "hang" else what in self.err()):
            assert self.proc.poll() is None, f"exited {self.proc.returncode} before {what!r}: {self.err()}"
            assert time.monotonic() < deadline, f"no {what!r} in {WAIT_S} s: {self.err()}"
            time.sleep(0.05)

    def ctrl_c(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def exit_code(self) -> int:
        """The exit status; a process still there after WAIT_S (waiting for the hung call) is killed and fails."""
        try:
            return self.proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)  # its threads' stacks into stderr (hanging_ingest.py)
            time.sleep(1)
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"still running {WAIT_S} s after the second Ctrl-C: {self.err()}")


@pytest.fixture
def ingests() -> Iterator[list[Ingest]]:
    started: list[Ingest] = []
    yield started
    for ingest in started:  # a failed test leaves no hung process behind
        if ingest.proc.poll() is None:
            ingest.proc.kill()
            ingest.proc.wait()
        ingest.proc.stdout.close()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("hang_at_batch", "job_docs", "failed_job"),
    [(1, "10000", 0), (3, "10", 1)],  # the only job's first batch; the second job's first batch (5-document batches)
)
def test_a_second_ctrl_c_during_a_native_call_ends_the_process_at_once_and_the_rerun_finishes(
    tmp_path: Path,
    tiny_embedder_dir: Path,
    ingests: list[Ingest],
    hang_at_batch: int,
    job_docs: str,
    failed_job: int,
) -> None:
    args = [*_args(tmp_path, tiny_embedder_dir), "--collection", "c", "--job-docs", job_docs]
    ingest = Ingest(tmp_path, f"batch:{hang_at_batch}", args)
    ingests.append(ingest)
    ingest.wait_for("hang")
    ingest.ctrl_c()
    ingest.wait_for("stopping after this batch")  # said while the batch is still inside its call
    ingest.ctrl_c()
    assert ingest.exit_code() == 130  # the batch's call never returns: the process ended without it
    err = ingest.err()
    ids = [line.split()[1].rstrip(":") for line in err.splitlines() if line.startswith("job ")]
    assert len(ids) == failed_job + 1  # no job recorded after the Ctrl-C
    jobs = JobStore(tmp_path / "vela" / "jobs.sqlite3")
    assert all(jobs.get(i).status == "succeeded" for i in ids[:failed_job])
    failed = jobs.get(ids[failed_job])
    assert failed.status == "failed" and "interrupted" in (failed.error or "")  # retryable, not left `running`
    assert f"vela ingest: interrupted; job {failed.id} failed" in err and "Traceback" not in err
    assert main(args) == 0  # the same command finishes what was cut short
    stats = CollectionStore(tmp_path / "vela").get("c").stats()
    assert stats["documents"] == 20 and stats["index"]["passages"] == stats["passages"] > 0


def test_ctrl_c_while_finishing_merges_ends_at_once_with_everything_stored_searchable(
    tmp_path: Path, tiny_embedder_dir: Path, ingests: list[Ingest]
) -> None:
    ingest = Ingest(tmp_path, "merge", [*_args(tmp_path, tiny_embedder_dir), "--collection", "c"])
    ingests.append(ingest)
    ingest.wait_for("vela ingest: finishing merges and the fusion choice...")
    ingest.ctrl_c()
    assert ingest.exit_code() == 130  # the background work never ends: the process did not wait for it
    err = ingest.err()
    assert "interrupted while finishing merges and the fusion choice; what is stored is searchable" in err
    assert "Traceback" not in err
    stats = CollectionStore(tmp_path / "vela").get("c").stats()
    assert stats["documents"] == 20 and stats["index"]["passages"] == stats["passages"] > 0
