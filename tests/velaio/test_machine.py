"""The machine a result records: the CPU's name and the vector extensions that decide what is fast on it."""

from __future__ import annotations

from pathlib import Path

from velaio.machine import cpu_model, machine


def test_the_cpu_is_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Example CPU @ 2.0GHz\nflags\t\t: fpu avx2 avx512f amx_bf16 sse4_2\n")
    assert cpu_model(info) == {"model": "Example CPU @ 2.0GHz", "extensions": ["avx2", "avx512f", "amx_bf16"]}
    assert cpu_model(tmp_path / "none")["extensions"] == []  # no /proc: the platform's name, no extensions
    assert set(machine()) == {"cpus", "cpu", "platform", "python"}
