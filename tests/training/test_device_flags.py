"""`vela train` hands the resolved VELA_DEVICE / VELA_PRECISION to the HF Trainer as flags the user can override."""

from __future__ import annotations

import json
from pathlib import Path

from training.cli_args import device_flags


def test_cpu_and_bf16_flags() -> None:
    assert device_flags(["--out", "o"], device="cpu", precision="fp32") == ["--out", "o", "--use_cpu", "true"]
    assert device_flags(["--out", "o"], device="cuda:0", precision="bf16") == ["--out", "o", "--bf16", "true"]
    assert device_flags(["--out", "o"], device="cuda:0", precision="fp32") == ["--out", "o"]


def test_the_command_line_wins() -> None:
    assert device_flags(["--bf16", "false"], device="cuda:0", precision="bf16") == ["--bf16", "false"]
    assert device_flags(["--fp16=true"], device="cuda:0", precision="bf16") == ["--fp16=true"]
    assert device_flags(["--use_cpu", "false"], device="cpu", precision="fp32") == ["--use_cpu", "false"]


def test_recipes_with_their_own_precision_flag() -> None:
    assert device_flags([], device="cuda:0", precision="bf16", precision_flag=True) == ["--precision", "bf16"]
    assert device_flags(["--precision", "fp32"], device="cuda:0", precision="bf16", precision_flag=True) == [
        "--precision",
        "fp32",
    ]


def test_a_config_file_still_wins(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"bf16": False, "learning_rate": 1e-4}))
    out = device_flags(["--config", str(config), "--out", "o"], device="cuda:0", precision="bf16")
    assert out == ["--bf16", "false", "--learning_rate", "0.0001", "--out", "o"]
