"""The machine a measurement ran on, as results record it: a figure from `vela eval` or a benchmark means little
without the CPU that produced it (int8 and bf16 speed, and even some rankings' ties, depend on its extensions).

Here, in the leaf every layer may import, so that the CLI's results and the benchmarks' describe a machine alike.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any

# The vector extensions that decide what is fast: int8 wants VNNI, bf16 pays only with AVX-512 bf16 or AMX.
EXTENSIONS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """The CPU's name and which of EXTENSIONS it has (`platform.processor()` where /proc/cpuinfo is not)."""
    name, flags = platform.processor() or "unknown", set()
    with contextlib.suppress(OSError):
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break  # the first CPU's lines tell it: every core of a machine is the same model
    return {"model": name, "extensions": [f for f in EXTENSIONS if f in flags]}


def machine() -> dict[str, Any]:
    """CPUs, CPU model, OS and Python: the `machine` object of a results JSON."""
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
