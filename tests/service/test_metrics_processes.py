"""/metrics and logs of `vela serve --processes 2`: what is read from the shared data directory at scrape time is
reported once, not once per process; process_* metrics are left out (they would describe whichever process
answered); every log line says which process wrote it."""

from __future__ import annotations

import json
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.service import test_processes as processes
from tests.service.serve_processes import call, child_pids, wait_until

server = processes.server  # the two-process `vela serve` of test_processes.py, as this module's fixture
DOCS = processes.DOCS


def _samples(base: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = call(base, "GET", "/metrics").text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_job_counts_are_reported_once_whichever_process_answers(server: dict[str, Any]) -> None:
    base = server["base"]
    processes._index(base, "c", DOCS)
    upsert_succeeded = frozenset({("kind", "upsert"), ("status", "succeeded")})
    for _ in range(10):  # fresh connections: either process answers
        samples = _samples(base)
        assert samples[("vela_jobs", upsert_succeeded)] == 1
        assert samples[("vela_jobs_finished_total", upsert_succeeded)] == 1
        assert samples[("vela_documents_indexed_total", frozenset({("kind", "upsert")}))] == len(DOCS)
        assert samples[("vela_index_passages", frozenset({("collection", "c")}))] == len(DOCS)
        assert not [name for name, _ in samples if name.startswith(("process_", "python_"))]


def test_each_process_logs_under_its_own_pid(server: dict[str, Any]) -> None:
    children = child_pids(server["proc"].pid)

    def records() -> list[dict[str, Any]]:
        return [json.loads(line) for line in server["log"].read_text().splitlines() if line.startswith("{")]

    # The fixture waits for one process to answer; the other may still be starting.
    wait_until(lambda: len({r["pid"] for r in records() if r["msg"] == "ready"}) == 2, 120, "both processes ready")
    ready = {r["pid"] for r in records() if r["msg"] == "ready"}
    assert ready == set(children)  # each API process said it was ready, in a line of its own pid
    slots = {r["slot"] for r in records() if r["msg"] == "ready"}
    assert slots == {0, 1}  # and of its own slot (vela serve sets VELA_PROCESS_SLOT in each process)
    (serving,) = [r for r in records() if r["msg"] == "serving"]
    assert serving["pid"] == server["proc"].pid  # the supervisor
