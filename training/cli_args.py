"""Every recipe's command line: `--out DIR [--config FILE] [flags]`, recipe dataclass + HF TrainingArguments.

A config file (JSON or YAML) holds the same keys as the flags; flags given on the command line win.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# Our defaults where the HF ones do not fit contrastive fine-tuning of a small encoder.
TRAINING_DEFAULTS: dict[str, Any] = {
    "num_train_epochs": 1,  # the recipe's own `epochs` are in its batch plan (re-packed every epoch)
    "learning_rate": 2e-5,
    "warmup_steps": 0,  # HF 5 has no warmup_ratio (a float < 1 here is a ratio); the figures ran without
    "lr_scheduler_type": "linear",
    "logging_steps": 5,
    "save_strategy": "no",
    "report_to": "none",
    "remove_unused_columns": False,
    "dataloader_num_workers": 0,
}


def _config_to_flags(path: Path) -> list[str]:
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file holds one mapping of flag names to values")
    flags: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool):
            flags += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            flags += [f"--{key}", *map(str, value)]
        else:
            flags += [f"--{key}", str(value)]
    return flags


def expand_config(argv: Sequence[str]) -> list[str]:
    """`--config FILE` replaced by the file's flags, placed first so that command-line flags win."""
    argv = list(argv)
    if "--config" not in argv:
        return argv
    i = argv.index("--config")
    if i + 1 >= len(argv):
        raise ValueError("--config needs a file")
    return _config_to_flags(Path(argv[i + 1])) + argv[:i] + argv[i + 2 :]


def device_flags(argv: Sequence[str], *, device: str, precision: str, precision_flag: bool = False) -> list[str]:
    """The recipe's argv with the resolved VELA_DEVICE / VELA_PRECISION added as HF flags: `--use_cpu true`
    on the CPU, `--bf16 true` for bf16 (`--precision P` where the recipe has that flag), each only where the
    command line or its config file does not set it (those win). They go last, so a recorded command reads as
    typed, then what the device added. The HF Trainer places the model on the GPU itself (every visible one
    under torchrun/accelerate)."""
    argv = expand_config(argv)  # a config file's flags must still win over these defaults
    given = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    flags: list[str] = []
    if device == "cpu" and "--use_cpu" not in given:
        flags += ["--use_cpu", "true"]
    if precision_flag:
        if "--precision" not in given:
            flags += ["--precision", precision]
    elif precision == "bf16" and not given & {"--bf16", "--fp16"}:
        flags += ["--bf16", "true"]
    return argv + flags


def parse_recipe_args(
    recipe_cls: type[T], argv: Sequence[str], *, prog: str, defaults: dict[str, Any] | None = None
) -> tuple[T, Any]:
    """(recipe args, TrainingArguments); `defaults` overrides TRAINING_DEFAULTS for one recipe."""
    from transformers import HfArgumentParser, TrainingArguments

    argv = ["--output_dir" if a == "--out" else a for a in expand_config(argv)]
    parser = HfArgumentParser((recipe_cls, TrainingArguments), prog=prog)  # type: ignore[arg-type]
    merged = {**TRAINING_DEFAULTS, **(defaults or {})}
    known = {a.dest for a in parser._actions}
    if unknown := sorted(set(merged) - known):  # argparse would ignore them silently
        raise ValueError(f"defaults name no flag of {prog}: {unknown}")
    parser.set_defaults(**merged)
    recipe, targs, *_ = parser.parse_args_into_dataclasses(args=argv)
    return recipe, targs
