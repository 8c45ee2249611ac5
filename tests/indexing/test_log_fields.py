"""What every JSON log line carries: the process (`pid`, and `slot` among the API processes of one `vela serve`),
and a traceback in `exc`, never in `msg`, also when a library logs one as its message."""

from __future__ import annotations

import io
import json
import logging
import os
import traceback
from collections.abc import Iterator

import pytest

from indexing.logs import SLOT_ENV, JsonFormatter


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """What the server's JSON formatter writes for the records logged while the test runs."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_every_line_names_its_process_and_slot(lines: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SLOT_ENV, raising=False)
    logging.getLogger("vela.test").info("alone")
    monkeypatch.setenv(SLOT_ENV, "1")  # as `vela serve` sets it in the second of its API processes
    logging.getLogger("vela.test").info("in a slot")
    alone, slotted = _records(lines)
    assert alone["pid"] == os.getpid() and "slot" not in alone
    assert slotted["pid"] == os.getpid() and slotted["slot"] == 1


def test_a_field_of_the_same_name_names_the_process_a_line_is_about(lines: io.StringIO) -> None:
    logging.getLogger("vela.test").warning("API process exited", extra={"pid": 4242, "slot": 0})
    (record,) = _records(lines)
    assert record["pid"] == 4242 and record["slot"] == 0


def test_an_exception_goes_to_exc(lines: io.StringIO) -> None:
    try:
        raise ConnectionError("refused")
    except ConnectionError:
        logging.getLogger("vela.test").exception("start-up failed")
    (record,) = _records(lines)
    assert record["msg"] == "start-up failed"
    assert "Traceback (most recent call last):" in str(record["exc"]) and "refused" in str(record["exc"])


def test_a_traceback_logged_as_the_message_goes_to_exc(lines: io.StringIO) -> None:
    """Starlette hands uvicorn a failed start-up as the text of the traceback, which uvicorn logs as its message."""
    try:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
    except ConnectionError:
        text = traceback.format_exc()
    logging.getLogger("uvicorn.error").error(text)
    logging.getLogger("uvicorn.error").error("Exception in 'lifespan' protocol\n" + text)
    bare, introduced = _records(lines)
    assert bare["msg"] == "ConnectionError: Error 111 connecting to 127.0.0.1:1. Connection refused."
    assert introduced["msg"] == "Exception in 'lifespan' protocol"
    for record in (bare, introduced):
        assert str(record["exc"]) == text.rstrip()
        assert "Traceback" not in str(record["msg"]) and "\n" not in str(record["msg"])


def test_a_message_that_only_mentions_a_traceback_is_left_as_it_is(lines: io.StringIO) -> None:
    logging.getLogger("vela.test").info('look for "Traceback (most recent call last):" in the output')
    (record,) = _records(lines)
    assert record["msg"].startswith("look for") and "exc" not in record  # type: ignore[union-attr]
