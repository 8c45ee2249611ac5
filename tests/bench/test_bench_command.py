"""`vela bench NAME` exits with the bench's own status: a main that returns a non-zero int fails the command, one
that returns None or a result (a dict) succeeds, and the bench sees its own options."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from cli import train_bench
from cli.main import main


@pytest.mark.parametrize(("returned", "status"), [(None, 0), (0, 0), (3, 3), ({"p50_ms": 1.0}, 0), (True, 0)])
def test_the_command_exits_with_the_bench_status(returned: Any, status: int, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def bench_main(argv: list[str]) -> Any:
        seen.append([sys.argv[0], *argv])
        return returned

    module = types.ModuleType("bench_fake")
    module.main = bench_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench_fake", module)
    monkeypatch.setitem(train_bench.BENCHES, "fake", ("bench_fake", "a stand-in"))
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the command rewrites argv for the bench's JSON
    assert main(["bench", "fake", "--rounds", "2"]) == status
    assert seen == [["vela bench fake", "--rounds", "2"]]
