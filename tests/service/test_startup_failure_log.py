"""A start-up that fails (Redis unreachable) is logged as JSON lines whose `msg` is one line and whose traceback
is in `exc`: through a real `vela serve`, whose start-up uvicorn reports with the traceback as its message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.service.conftest import _free_port

REPO = Path(__file__).resolve().parents[2]


def test_an_unreachable_redis_at_start_up_is_logged_with_its_traceback_in_exc(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "VELA_DATA_DIR": str(tmp_path / "data"),
        "VELA_EMBEDDER": str(tiny_embedder_dir),
        "VELA_PROCESSES": "1",
        "VELA_REDIS_URL": f"redis://127.0.0.1:{_free_port()}/0",  # a port nothing listens on
    }
    cmd = [sys.executable, "-m", "cli.main", "serve", "--port", str(_free_port())]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert records, done.stderr[-3000:]
    failed = [r for r in records if "exc" in r]
    assert failed, done.stderr[-3000:]
    for record in records:
        assert "\n" not in record["msg"] and "Traceback" not in record["msg"], record
    # One process wrote every line (VELA_PROCESSES=1: no supervisor, so no slot either).
    assert len({r["pid"] for r in records}) == 1 and not any("slot" in r for r in records)
    (redis,) = [r for r in failed if "ConnectionError" in r["exc"]]
    assert redis["level"] == "error" and "ConnectionError" in redis["msg"]
    assert redis["exc"].startswith("Traceback (most recent call last):")
