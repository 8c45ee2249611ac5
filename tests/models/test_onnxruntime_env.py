"""A Vela process sends no ONNX Runtime telemetry (models/_onnxruntime_env.py).

ONNX Runtime's Linux wheel posts usage events to Microsoft a few seconds after a session is created. The slow test
watches a process's connect() calls under strace: onnxruntime alone does connect (the control, which shows the
check can fail), and the same work after `import models` does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys, time
if sys.argv[1] == "vela":
    import models
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:  # telemetry starts about 10 s after the session is made
    session.run(None, {"x": np.ones(1, np.float32)})
    time.sleep(0.01)
"""


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}


@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("0", "0"), ("1", "1")])
def test_the_module_turns_telemetry_off_unless_the_environment_says(given: str | None, expected: str) -> None:
    # That `import models` runs it first is checked by tests/test_import_order.py's probe (one torch import, not two).
    env = _clean_env()
    if given is not None:
        env["ORT_DISABLE_TELEMETRY"] = given
    code = "import os, runpy; runpy.run_path('models/_onnxruntime_env.py'); print(os.environ['ORT_DISABLE_TELEMETRY'])"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


def _inet_connects(tmp_path: Path, mode: str) -> subprocess.Popen[bytes]:
    trace = tmp_path / f"{mode}.trace"
    command = ["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(trace), sys.executable, "-c", PROBE, mode, "25"]
    return subprocess.Popen(command, cwd=REPO, env=_clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (make strace installs it)")
def test_no_process_of_vela_phones_home(tmp_path: Path) -> None:
    procs = {mode: _inet_connects(tmp_path, mode) for mode in ("onnxruntime", "vela")}  # run side by side
    for proc in procs.values():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode(errors="replace")
    connects = {
        mode: [line for line in (tmp_path / f"{mode}.trace").read_text().splitlines() if "AF_INET" in line]
        for mode in procs
    }
    assert connects["onnxruntime"], "the control made no connection: the check below would prove nothing"
    assert connects["vela"] == []
