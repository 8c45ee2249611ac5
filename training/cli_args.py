"""Every recipe's command line: `--out DIR [--config FILE] [flags]`, recipe dataclass + HF TrainingArguments.

A config file (JSON or YAML) holds the same keys as the flags; flags given on the command line win. Bad
arguments stop the recipe before any work with one line on stderr and exit status 2, as argparse does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from training.arg_checks import check_finite, check_out_dir, check_training_ranges
from training.checkpoints import CHECKPOINT_DEFAULTS, resolve_resume, wants_resume

T = TypeVar("T")

# Our defaults where the HF ones do not fit contrastive fine-tuning of a small encoder.
TRAINING_DEFAULTS: dict[str, Any] = {
    "num_train_epochs": 1,  # the recipe's own `epochs` are in its batch plan (re-packed every epoch)
    "learning_rate": 2e-5,
    "warmup_steps": 0,  # HF 5 has no warmup_ratio (a float < 1 here is a ratio); the figures ran without
    "lr_scheduler_type": "linear",
    "logging_steps": 5,
    "save_strategy": "no",  # recipes that can resume save checkpoints instead (CHECKPOINT_DEFAULTS)
    "report_to": "none",
    "remove_unused_columns": False,
    "dataloader_num_workers": 0,
}
HF_BATCH_FLAG = "per_device_train_batch_size"  # the recipe's own `batch_size`, where it has one


def _yaml_mapping(path: Path, text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise ValueError(f"{path}: not valid YAML at {where}: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from None


def _config_to_flags(path: Path) -> list[str]:
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        data = _yaml_mapping(path, text)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
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
    """Each `--config FILE` (or `--config=FILE`) replaced by the file's flags, placed first so that
    command-line flags win (and a later file over an earlier one)."""
    files: list[Path] = []
    rest: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        if items[i] == "--config":
            if i + 1 >= len(items):
                raise ValueError("--config needs a file")
            files.append(Path(items[i + 1]))
            i += 2
            continue
        if items[i].startswith("--config="):
            files.append(Path(items[i].split("=", 1)[1]))
        else:
            rest.append(items[i])
        i += 1
    return [flag for f in files for flag in _config_to_flags(f)] + rest


def given_flag_names(argv: Sequence[str]) -> set[str]:
    """The flags a command line (config files included) sets, as field names: `--save-steps=5` -> save_steps."""
    return {a[2:].split("=", 1)[0].replace("-", "_") for a in expand_config(argv) if a.startswith("--")}


def device_flags(argv: Sequence[str], *, device: str, precision: str, precision_flag: bool = False) -> list[str]:
    """The recipe's argv with the resolved VELA_DEVICE / VELA_PRECISION added as HF flags: `--use_cpu true`
    on the CPU, `--bf16 true` for bf16 (`--precision P` where the recipe has that flag), each only where the
    command line or its config file does not set it (those win). They go last, so a recorded command reads as
    typed, then what the device added. The HF Trainer places the model on the GPU itself (every visible one
    under torchrun/accelerate)."""
    argv = expand_config(argv)  # a config file's flags must still win over these defaults
    given = given_flag_names(argv)
    flags: list[str] = []
    if device == "cpu" and "use_cpu" not in given:
        flags += ["--use_cpu", "true"]
    if precision_flag:
        if "precision" not in given:
            flags += ["--precision", precision]
    elif precision == "bf16" and not given & {"bf16", "fp16"}:
        flags += ["--bf16", "true"]
    return argv + flags


def _recipe_parser(types: tuple[type, ...], prog: str) -> Any:
    """HfArgumentParser for the recipe's dataclasses (TrainingArguments last), plus `--out`, `--config` and
    `--register` (the last two are handled before parsing; they are here for `--help`). Abbreviated flags are refused:
    `--out=DIR` must not read as an ambiguous prefix of `--output_dir`, nor a typo as some other flag."""
    from transformers import HfArgumentParser

    class RecipeParser(HfArgumentParser):
        def error(self, message: str) -> NoReturn:
            print(f"{self.prog}: error: {message}", file=sys.stderr)
            raise SystemExit(2)

    parser = RecipeParser(
        types,  # type: ignore[arg-type]
        prog=prog,
        usage=f"{prog} --out DIR [--config FILE] [--register NAME] [flags]",
        allow_abbrev=False,
    )
    group = parser.add_argument_group("vela train")
    hidden = argparse.SUPPRESS  # no "(default: None)" in --help, and no namespace entry
    group.add_argument("--out", dest="output_dir", metavar="DIR", default=hidden, help="the trained model's folder")
    group.add_argument("--config", metavar="FILE", default=hidden, help="JSON or YAML file of flags; flags win")
    group.add_argument("--register", metavar="NAME", default=hidden, help="register the model as NAME in vela models")
    return parser


def _given_dests(parser: Any, argv: Sequence[str]) -> set[str]:
    actions = parser._option_string_actions  # exact option strings: abbreviations are off
    return {actions[a.split("=", 1)[0]].dest for a in argv if a.split("=", 1)[0] in actions}


def _one_batch_size(ns: dict[str, Any], given: set[str]) -> None:
    """A recipe with its own `--batch_size` plans its batches with it; HF's per-device flag is its alias, and
    the TrainingArguments record the batch actually used."""
    if HF_BATCH_FLAG in given:
        if "batch_size" in given and ns["batch_size"] != ns[HF_BATCH_FLAG]:
            raise ValueError(
                f"--batch_size {ns['batch_size']} and --{HF_BATCH_FLAG} {ns[HF_BATCH_FLAG]} disagree: "
                "they are one setting in this recipe (give --batch_size)"
            )
        ns["batch_size"] = ns[HF_BATCH_FLAG]
    ns[HF_BATCH_FLAG] = ns["batch_size"]


def parse_recipe_args(
    recipe_cls: type[T],
    argv: Sequence[str],
    *,
    prog: str,
    defaults: dict[str, Any] | None = None,
    resumable: bool = False,
) -> tuple[T, Any]:
    """(recipe args, TrainingArguments); `defaults` overrides TRAINING_DEFAULTS for one recipe. A recipe
    that passes `resume_from_checkpoint` on to `trainer.train()` says `resumable`: it then saves checkpoints
    by default, and `--resume_from_checkpoint` (a folder, or `true`: the latest in --out) is resolved to a
    checkpoint folder here. Other recipes refuse the flag. Bad arguments exit 2 with one line."""
    from transformers import TrainingArguments

    recipe, targs = parse_dataclasses(
        (recipe_cls, TrainingArguments), argv, prog=prog, base=TRAINING_DEFAULTS, defaults=defaults, resumable=resumable
    )
    return recipe, targs


def parse_dataclasses(
    types: tuple[type, ...],
    argv: Sequence[str],
    *,
    prog: str,
    base: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
    resumable: bool = False,
) -> tuple[Any, ...]:
    """One instance of each of `types`, the last a TrainingArguments (sub)class, read as parse_recipe_args
    reads them; `base` holds the defaults the checkpoint ones (when `resumable`) and then `defaults` override.
    For a recipe whose flags span several dataclasses (the reranker's model, data and training ones)."""
    argv = expand_config(argv)
    parser = _recipe_parser(types, prog)
    merged = {**(base or {}), **(CHECKPOINT_DEFAULTS if resumable else {}), **(defaults or {})}
    known = {a.dest for a in parser._actions}
    if unknown := sorted(set(merged) - known):  # argparse would ignore them silently
        raise ValueError(f"defaults name no flag of {prog}: {unknown}")
    parser.set_defaults(**merged)
    namespace, rest = parser.parse_known_args(argv)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)} ({prog} --help lists the flags)")
    given = _given_dests(parser, argv)
    if "output_dir" not in given:
        parser.error("--out DIR is required: the folder the trained model is written to")
    ns = vars(namespace)
    fields = [{f.name for f in dataclasses.fields(t) if f.init} for t in types]
    try:
        check_finite(ns)  # before the dataclasses' own range checks, which NaN slips through
        check_training_ranges(ns)
        check_out_dir(str(ns["output_dir"]))
        if any("batch_size" in names for names in fields):
            _one_batch_size(ns, given)
        parsed = tuple(t(**{name: ns[name] for name in names}) for t, names in zip(types, fields, strict=True))
        targs = parsed[-1]
        if wants_resume(targs.resume_from_checkpoint) and not resumable:
            raise ValueError("this recipe cannot resume a run yet: drop --resume_from_checkpoint")
        targs.resume_from_checkpoint = resolve_resume(targs.resume_from_checkpoint, str(targs.output_dir))
    except ValueError as e:
        parser.error(str(e))
    return parsed
