"""The client's types as an application sees them: `mypy --strict` on a snippet, run from outside the repository
against the installed distribution (its py.typed marker, and an editable install mypy can follow). Every write
method returns `Job` with wait=True and `JobAccepted` without, and waiting options without wait=True are errors;
`Fusion` takes only the server's fusion methods and normalisations, and `Readiness` has the probe's `queue`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

SNIPPET = """\
from typing import assert_type

from vela_client import AsyncVelaClient, Fusion, Job, JobAccepted, VelaClient


def writes(v: VelaClient) -> None:
    assert_type(v.index("c", [{"id": "a", "text": "x"}], schema={"n": "integer"}, wait=True), Job)
    assert_type(v.index("c", [{"id": "a", "text": "x"}]), JobAccepted)
    assert_type(v.delete_document("c", "a", wait=True, timeout=5), Job)
    assert_type(v.patch_document("c", "a", {"n": 1}, wait=True), Job)
    assert_type(v.delete_documents("c", ids=["a", "b"], wait=True, on_progress=print), Job)
    assert_type(v.delete_documents("c", filter={"must": []}), JobAccepted)
    print(v.delete_documents("c", ids=("a",), wait=True).result)
    assert_type(v.set_schema("c", {"n": "integer"}, wait=True), Job)
    assert_type(v.reindex("c", "default", wait=True, on_progress=print), Job)
    assert_type(v.reindex("c", "default"), JobAccepted)
    assert_type(v.promote("c", wait=True), Job)
    assert_type(v.promote("c"), JobAccepted)
    assert_type(v.rollback("c", wait=True), Job)
    assert_type(v.rollback("c", wait=False), JobAccepted)
    print(v.reindex("c", "default", wait=True).result)
    v.reindex("c", "default", on_progress=print)  # E
    v.promote("c", timeout=5)  # E
    v.rollback("c", on_progress=print)  # E
    v.delete_documents("c", ids=["a"], timeout=5)  # E


def models(v: VelaClient) -> None:
    assert_type(v.ready().queue, str | None)
    v.search("c", "q", fusion=Fusion(method="convex", alpha=0.3, normalization="zscore"))
    Fusion(method="weighted")  # E arg-type
    Fusion(method="convex", normalization="l2")  # E arg-type


async def async_writes(v: AsyncVelaClient) -> None:
    assert_type(await v.index("c", [{"id": "a", "text": "x"}], wait=True), Job)
    assert_type(await v.delete_document("c", "a"), JobAccepted)
    assert_type(await v.delete_documents("c", filter={"must": []}, wait=True, timeout=5), Job)
    assert_type(await v.delete_documents("c", ids=["a"]), JobAccepted)
    assert_type(await v.reindex("c", "default", wait=True), Job)
    assert_type(await v.promote("c", wait=True), Job)
    assert_type(await v.rollback("c"), JobAccepted)
    print((await v.reindex("c", "default", wait=True)).result)
    await v.promote("c", on_progress=print)  # E
    await v.delete_documents("c", filter={"must": []}, on_progress=print)  # E
"""


def test_mypy_strict_sees_the_overloads(tmp_path: Path) -> None:
    source = tmp_path / "app.py"
    source.write_text(SNIPPET)
    # From a directory of its own (an empty configuration, the repository not on the path), as in an application.
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), source.name]
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    # "# E" marks a line that must fail as a call matching no overload; "# E <code>", with that error code.
    expected = {}
    for i, line in enumerate(SNIPPET.splitlines(), 1):
        marked = re.search(r"# E(?: ([a-z-]+))?$", line)
        if marked:
            expected[i] = marked.group(1) or "call-overload"
    errors = {int(n): code for n, code in re.findall(r"^app\.py:(\d+): error: .*\[([a-z-]+)\]$", out.stdout, re.M)}
    assert errors == expected, out.stdout + out.stderr
