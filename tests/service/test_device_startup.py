"""VELA_DEVICE at start-up: `cuda` on a host without CUDA stops the API, `vela serve`, `vela worker` and
`vela train` before they serve or read anything, with a message that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cli.main import main as vela
from models.device import DeviceError
from service.main import create_app
from service.settings import Settings


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_create_app_refuses_cuda_before_touching_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with pytest.raises(DeviceError, match="VELA_DEVICE=cuda but CUDA is not available"):
        create_app(Settings(data_dir=data, device="cuda"))
    assert not data.exists()


def test_settings_validate_the_device_string() -> None:
    with pytest.raises(ValueError, match="device"):
        Settings(device="gpu")
    assert Settings().device == "auto" and Settings().precision == "auto"


def test_auto_on_a_cpu_host_serves_on_the_cpu(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path))
    state = app.state.vela
    assert (state.embedders.device, state.embedders.precision) == ("cpu", "fp32")
    assert (state.rerankers.device, state.rerankers.precision) == ("cpu", "fp32")


def test_vela_serve_exits_with_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VELA_DEVICE", "cuda:0")
    assert vela(["serve", "--data-dir", str(tmp_path), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "vela serve: VELA_DEVICE=cuda:0 but CUDA is not available" in err and "VELA_DEVICE=cpu" in err


def test_vela_worker_exits_before_taking_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VELA_DEVICE", "cuda")
    monkeypatch.setenv("VELA_REDIS_URL", "redis://127.0.0.1:1/0")  # never reached
    assert vela(["worker", "--data-dir", str(tmp_path / "d")]) == 2
    assert "VELA_DEVICE=cuda but CUDA is not available" in capfd.readouterr().err  # the JSON log line
    assert not (tmp_path / "d").exists()


def test_vela_train_exits_before_reading_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VELA_DEVICE", "cuda")
    assert vela(["train", "contrastive", "--out", str(tmp_path / "out")]) == 2
    assert "vela train: VELA_DEVICE=cuda but CUDA is not available" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
