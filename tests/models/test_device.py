"""VELA_DEVICE / VELA_PRECISION resolution on a CPU host, with CUDA faked where a test needs it."""

from __future__ import annotations

import logging
import os

import pytest
import torch

from models import EmbedderCache
from models.device import DeviceError, cuda_index, pin_visible_device, resolve_device, resolve_precision
from models.reranker import RerankerCache


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch):
    """Pretend torch sees `count` CUDA devices of compute capability `capability`."""

    def install(count: int = 2, capability: tuple[int, int] = (9, 0)) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)

    return install


def test_cpu_and_auto_without_cuda(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("cpu") == "cpu"
    with caplog.at_level(logging.INFO, logger="vela.device"):
        assert resolve_device("auto") == "cpu"
    assert any(r.getMessage() == "device chosen" and r.device == "cpu" for r in caplog.records)  # type: ignore[attr-defined]
    assert resolve_precision("auto", "cpu") == "fp32"  # the CPU keeps fp32 unless bf16 is asked for
    assert resolve_precision("bf16", "cpu") == "bf16"
    assert resolve_precision("fp32", "cpu") == "fp32"


@pytest.mark.parametrize("setting", ["cuda", "cuda:0", "cuda:1"])
def test_cuda_without_cuda_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match=rf"VELA_DEVICE={setting} but CUDA is not available: .*VELA_DEVICE=cpu"):
        resolve_device(setting)


def test_auto_picks_cuda_and_logs_it(fake_cuda, caplog: pytest.LogCaptureFixture) -> None:
    fake_cuda(count=2)
    with caplog.at_level(logging.INFO, logger="vela.device"):
        assert resolve_device("auto") == "cuda:0"
    assert any(getattr(r, "device", None) == "cuda:0" for r in caplog.records)
    assert resolve_device("cuda") == "cuda:0"
    assert resolve_device("CUDA:1") == "cuda:1"
    with pytest.raises(DeviceError, match="has 2 CUDA device"):
        resolve_device("cuda:2")
    assert cuda_index("cuda:1") == 1 and cuda_index("cpu") is None


def test_precision_follows_the_device(fake_cuda) -> None:
    fake_cuda(capability=(8, 0))  # Ampere and newer: native bf16
    assert resolve_precision("auto", "cuda:0") == "bf16"
    assert resolve_precision("fp32", "cuda:0") == "fp32"
    fake_cuda(capability=(7, 5))  # Turing (T4): no native bf16
    assert resolve_precision("auto", "cuda:0") == "fp32"
    with pytest.raises(DeviceError, match="no native bf16"):
        resolve_precision("bf16", "cuda:0")


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "mps", "cuda:-1"])
def test_bad_settings(bad: str) -> None:
    with pytest.raises(DeviceError, match="is not one of"):
        resolve_device(bad)
    with pytest.raises(DeviceError, match="is not one of"):
        resolve_precision("fp16", "cpu")


def test_pin_visible_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert pin_visible_device("auto") == "auto"
    assert pin_visible_device("cuda:3") == "cuda"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert pin_visible_device("cuda:1") == "cuda"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "6"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    with pytest.raises(DeviceError, match="names 2 device"):
        pin_visible_device("cuda:2")
    monkeypatch.setenv("LOCAL_RANK", "0")  # torchrun: each rank has its own GPU already
    assert pin_visible_device("cuda:1") == "cuda:1"


def test_caches_resolve_their_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cache = EmbedderCache(device="auto", precision="auto")  # what a Ray encoder actor is handed
    assert (cache.device, cache.precision) == ("cpu", "fp32")
    rerankers = RerankerCache(device="auto", precision="bf16")
    assert (rerankers.device, rerankers.precision) == ("cpu", "bf16")
    with pytest.raises(DeviceError):
        EmbedderCache(device="cuda")
