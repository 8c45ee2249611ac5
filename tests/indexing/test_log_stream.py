"""Logs go to the stderr of the moment: a stream replaced after logging was configured is not written to closed."""

from __future__ import annotations

import io
import json
import logging

import pytest

from indexing.logs import configure_logging


def test_logs_follow_a_replaced_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    first = io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    try:
        configure_logging("INFO")
        first.close()  # what a finished capture or a rotated file leaves behind
        second = io.StringIO()
        monkeypatch.setattr("sys.stderr", second)
        logging.getLogger("vela.test").info("after the swap", extra={"n": 1})
        record = json.loads(second.getvalue())
        assert record["msg"] == "after the swap" and record["n"] == 1
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
