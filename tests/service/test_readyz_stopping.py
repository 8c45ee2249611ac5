"""From the stop signal on, /readyz answers 503 not_ready: a load balancer stops sending new requests to a process
that drains its open ones; searches already routed to it are still answered."""

from __future__ import annotations

from pathlib import Path

from service.state import begin_stop
from tests.service.conftest import running_app


def test_readyz_is_503_once_the_process_is_stopping(tmp_path: Path) -> None:
    with running_app(tmp_path) as (client, app):
        assert client.get("/readyz").status_code == 200
        begin_stop(app.state.vela)  # what the SIGTERM handler calls (service/server.py StopSignalServer)
        r = client.get("/readyz")
        assert r.status_code == 503 and r.json()["error"]["code"] == "not_ready", r.text
        assert client.get("/healthz").status_code == 200  # alive, still draining
