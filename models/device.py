"""Which device and precision the encoders, rerankers and trainers run on: one place decides (VELA_DEVICE).

`resolve_device` turns the setting (`auto`, `cpu`, `cuda`, `cuda:N`) into a concrete torch device string and
`resolve_precision` turns VELA_PRECISION (`auto`, `fp32`, `bf16`) into the precision used on that device. Both
run once at start-up (API lifespan, `vela serve`, `vela worker`, `vela train`): a setting the host cannot honour
raises DeviceError there, never in the middle of a request.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

log = logging.getLogger("vela.device")

DEVICE_PATTERN = r"^(auto|cpu|cuda|cuda:\d+)$"
PRECISION_PATTERN = r"^(auto|fp32|bf16)$"


class DeviceError(RuntimeError):
    """A VELA_DEVICE / VELA_PRECISION setting this host cannot honour; raised at start-up."""


def _torch_cuda() -> tuple[bool, int]:
    import torch

    if not torch.cuda.is_available():
        return False, 0
    return True, int(torch.cuda.device_count())


def _no_cuda_reason() -> str:
    import torch

    if torch.version.cuda is None:
        return (
            f"this torch ({torch.__version__}) is a CPU-only build; install the CUDA build of torch "
            "(docs/gpu.md) or set VELA_DEVICE=cpu"
        )
    return "torch sees no CUDA device (driver, CUDA_VISIBLE_DEVICES?); set VELA_DEVICE=cpu or auto to run on the CPU"


def resolve_device(setting: str = "auto") -> str:
    """'cpu' or 'cuda:N' for the setting. `auto` picks cuda:0 when CUDA is present and logs the choice;
    `cuda`/`cuda:N` on a host without that device raise DeviceError with what to do."""
    setting = (setting or "auto").strip().lower()
    if not re.match(DEVICE_PATTERN, setting):
        raise DeviceError(f"VELA_DEVICE={setting!r} is not one of auto, cpu, cuda, cuda:N")
    if setting == "cpu":
        return "cpu"
    available, count = _torch_cuda()
    if setting == "auto":
        device = "cuda:0" if available and count else "cpu"
        log.info("device chosen", extra={"setting": "auto", "device": device, "cuda_devices": count})
        return device
    index = int(setting.partition(":")[2] or 0)
    if not available or not count:
        raise DeviceError(f"VELA_DEVICE={setting} but CUDA is not available: {_no_cuda_reason()}")
    if index >= count:
        raise DeviceError(f"VELA_DEVICE={setting} but this host has {count} CUDA device(s) (cuda:0..cuda:{count - 1})")
    return f"cuda:{index}"


def cuda_index(device: str) -> int | None:
    """The CUDA ordinal of a resolved device string; None for the CPU."""
    if not device.startswith("cuda"):
        return None
    return int(device.partition(":")[2] or 0)


def bf16_supported(device: str) -> bool:
    """Whether bf16 autocast is native on this (resolved) device: CUDA devices of compute capability 8.0 or
    newer (Ampere, Hopper, ...). On the CPU bf16 works but pays off only with AMX, so `auto` keeps fp32 there."""
    index = cuda_index(device)
    if index is None:
        return False
    import torch

    major, _minor = torch.cuda.get_device_capability(index)
    return bool(major >= 8)


def resolve_precision(setting: str, device: str) -> str:
    """'fp32' or 'bf16' on a resolved device. `auto`: bf16 where the device supports it (CUDA, compute
    capability >= 8.0), else fp32. `bf16` on a CUDA device without bf16 raises DeviceError; on the CPU it is
    allowed (autocast; faster only on CPUs with AMX)."""
    setting = (setting or "auto").strip().lower()
    if not re.match(PRECISION_PATTERN, setting):
        raise DeviceError(f"VELA_PRECISION={setting!r} is not one of auto, fp32, bf16")
    if setting == "fp32":
        return "fp32"
    native = bf16_supported(device)
    if setting == "auto":
        return "bf16" if native else "fp32"
    if cuda_index(device) is not None and not native:
        raise DeviceError(f"VELA_PRECISION=bf16 but {device} has no native bf16 (compute capability < 8.0); use fp32")
    return "bf16"


def pin_visible_device(setting: str) -> str:
    """For a single-process trainer: `cuda:N` becomes CUDA_VISIBLE_DEVICES=N (the N-th of those already
    visible) and the setting `cuda`, so that the HF Trainer uses that GPU alone. Must run before CUDA is
    initialised. Under torchrun/accelerate (LOCAL_RANK set) every rank takes its own GPU: left as it is."""
    setting = (setting or "auto").strip().lower()
    if not re.match(r"^cuda:\d+$", setting) or "LOCAL_RANK" in os.environ:
        return setting
    index = int(setting.partition(":")[2])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else None
    if ids is not None and index >= len(ids):
        raise DeviceError(f"VELA_DEVICE={setting} but CUDA_VISIBLE_DEVICES={visible} names {len(ids)} device(s)")
    os.environ["CUDA_VISIBLE_DEVICES"] = ids[index] if ids is not None else str(index)
    return "cuda"


def cpu_has_vnni() -> bool:
    """True where the CPU multiplies u8 x s8 without saturating (AVX-512 VNNI or AVX-VNNI; read on Linux).

    Without it the int8 kernels add u8 x s8 products in pairs into int16, which full 8-bit weights can
    overflow: the per-token document graph then keeps its weights to 7 bits."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_vnni" in flags or " avx_vnni" in flags
