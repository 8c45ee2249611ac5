"""Logs go to the stderr of the moment: a stream replaced after logging was configured is not written to closed."""

from __future__ import annotations

import io
import json
import logging
import os

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


def test_lines_are_json_without_colour_codes_and_bars_are_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's records carry `color_message` (ANSI codes), and the loaders' progress bars write carriage-return
    lines: neither belongs in a log of one JSON object per line."""
    import transformers

    for name in ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE"):  # recorded as absent: restored so at the end
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, transformers.utils.logging.is_progress_bar_enabled())
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    try:
        configure_logging("INFO")
        logging.getLogger("uvicorn.error").info("Started", extra={"color_message": "\x1b[1mStarted\x1b[0m"})
        record = json.loads(out.getvalue())
        assert record["msg"] == "Started" and "color_message" not in record
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" and os.environ["TQDM_DISABLE"] == "1"
        assert not transformers.utils.logging.is_progress_bar_enabled()
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        if saved[2]:
            transformers.utils.logging.enable_progress_bar()
