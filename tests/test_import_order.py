"""One OpenMP runtime per serving process: torch's libgomp loaded before FAISS's, and idle OpenMP threads passive.

FAISS loaded first keeps its own libgomp beside torch's, and the two thread pools compete for the cores (see
models/_openmp.py). The check is behavioural: a thread count set through FAISS must be what torch's libgomp
reports, which holds only when FAISS's OpenMP calls bind to torch's runtime.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import ctypes, json, os, sys
import {module}
import faiss, torch
(gomp,) = {{line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line and "/torch/" in line}}
faiss.omp_set_num_threads(3)
mods = list(sys.modules)
print(json.dumps({{
    "torch_first": mods.index("torch") < mods.index("faiss"),
    "torch_runtime_threads": ctypes.CDLL(gomp).omp_get_max_threads(),
    "wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    "ort_telemetry_off": os.environ.get("ORT_DISABLE_TELEMETRY"),
}}))
"""


def _probe(module: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "ORT_DISABLE_TELEMETRY")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("module", ["service.main", "models"])
def test_serving_imports_give_one_passive_openmp_runtime(module: str) -> None:
    got = _probe(module)
    assert got["torch_first"], f"importing {module} loads FAISS before torch"
    assert got["torch_runtime_threads"] == 3, "FAISS runs its own OpenMP runtime beside torch's"
    assert got["wait_policy"] == "PASSIVE"
    assert (
        got["ort_telemetry_off"] == "1"
    )  # set on import, before anything loads onnxruntime (models/_onnxruntime_env.py)


def test_the_probe_sees_two_runtimes_when_faiss_comes_first() -> None:
    # The check above can fail: with FAISS imported first, its thread count does not reach torch's runtime.
    got = _probe("faiss")
    assert not got["torch_first"] and got["torch_runtime_threads"] != 3
