"""What the tests of the commands that talk to a running server share (`vela jobs`, `vela collections`, `vela alias`,
`vela search`): a server with keys on, the flags' defaults through the environment, and one-line failures."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from vela_client import VelaClient

from tests.service.conftest import running_app

API_KEY = "cli-remote-key"
NOTES = [
    {
        "id": f"d{i}",
        "title": f"Note {i}",
        "text": f"tides and the moon,   note {i}. " + "The sea rises and falls twice a day. " * 3,
        "metadata": {"topic": "sea" if i % 2 else "sky"},
    }
    for i in range(8)
]


@contextmanager
def serving(root: Path, embedder: Path, **collections: list[dict[str, Any]]) -> Iterator[str]:
    """A server with API keys on, holding these collections (each indexed by one job): its URL."""
    with running_app(root / "data", api_keys=API_KEY, embedder=str(embedder)) as (http, _):
        url = str(http.base_url)
        with VelaClient(url, api_key=API_KEY) as client:
            for name, documents in collections.items():
                client.index(name, documents, wait=True)
        yield url


def use_server(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server through VELA_URL and VELA_API_KEY, as the flags' defaults."""
    monkeypatch.setenv("VELA_URL", url)
    monkeypatch.setenv("VELA_API_KEY", API_KEY)


def out_json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def table(capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    """Standard output as a table: each line split on runs of spaces."""
    return [line.split() for line in capsys.readouterr().out.splitlines()]


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def unused_url() -> str:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"
