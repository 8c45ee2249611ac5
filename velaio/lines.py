"""Line readers whose every fault is a ValueError naming the file and the line (`corpus.jsonl:5: ...`).

A text-mode read would report bad UTF-8 at a byte offset into its buffer and bad JSON at "line 1" of the
line it was given: neither tells an operator where to look in a file of a million lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, the line without its line ending) for every line, blank ones included."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{n}: not UTF-8 text (byte {e.start + 1} of the line)") from None
            yield n, line.rstrip("\r\n")


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line."""
    for n, line in text_lines(path):
        if line.strip():
            yield n, parse_json_line(path, n, line)


def parse_json_line(path: Path, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{n}: not a JSON line ({e.msg}: column {e.colno})") from None


def json_objects(path: Path, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; a line that is JSON but no object names `what` it should be."""
    for n, value in json_lines(path):
        if not isinstance(value, dict):
            raise ValueError(f"{path}:{n}: {what} is a JSON object, got {type(value).__name__}")
        yield n, value
