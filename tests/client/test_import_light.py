"""The client is a separate, light distribution: importing it loads no model, index or server code."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

# Top-level modules a RAG application must not pay for when it only calls the API.
HEAVY = {"torch", "faiss", "numpy", "transformers", "fastapi", "uvicorn", "prometheus_client"}
SERVER = {"service", "indexing", "models", "training", "cli", "bench", "velaio"}


def test_importing_the_client_loads_no_server_or_model_package(tmp_path: Path) -> None:
    code = "import json, sys, vela_client; print(json.dumps(sorted(sys.modules)))"
    # From an empty directory: the repository root is not on the path, as in an application.
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in json.loads(out.stdout)}
    assert "vela_client" in loaded and "httpx" in loaded
    assert not loaded & (HEAVY | SERVER), sorted(loaded & (HEAVY | SERVER))


def test_the_distribution_depends_on_httpx_pydantic_and_anyio_only() -> None:
    requires = metadata.requires("vela-client") or []
    names = {r.split(";")[0].split("<")[0].split(">")[0].split("=")[0].split("[")[0].strip() for r in requires}
    assert names == {"httpx", "pydantic", "anyio"}
