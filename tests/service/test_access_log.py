"""VELA_ACCESS_LOG: one `vela.access` line per request (method, path, status, ms, request id), errors included."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.service.conftest import running_server


def test_each_request_is_one_access_line_when_asked_for(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="vela.access")
    with running_server(tmp_path / "on", access_log=True) as client:
        ok = client.get("/healthz", headers={"X-Request-ID": "probe-1"})
        missing = client.get("/collections/nope")
    lines = [r for r in caplog.records if r.name == "vela.access"]
    seen = {(r.method, r.path, r.status, r.request_id) for r in lines}  # type: ignore[attr-defined]
    assert ("GET", "/healthz", 200, "probe-1") in seen and ok.status_code == 200
    assert ("GET", "/collections/nope", 404, missing.headers["x-request-id"]) in seen
    assert all(isinstance(r.ms, float) and r.ms >= 0 for r in lines)  # type: ignore[attr-defined]
    caplog.clear()
    with running_server(tmp_path / "off") as client:  # off by default
        client.get("/healthz")
    assert not [r for r in caplog.records if r.name == "vela.access"]
