"""`vela bench gpu` refuses to run without CUDA, with a message that says what it needs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench import gpu
from cli.main import BENCHES


def test_registered() -> None:
    assert BENCHES["gpu"][0] == "bench.gpu"


def test_refuses_without_cuda(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="vela bench gpu: no CUDA device"):
        gpu.main(["--out", str(tmp_path / "gpu.json")])
    assert not (tmp_path / "gpu.json").exists()
