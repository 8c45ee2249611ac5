"""Checks the recipes' argument dataclasses run as they are built, so that a wrong path stops `vela train`
before any data is read, with a message that names the flag the user typed."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PAIR_KINDS = ("qrels", "mine")


def check_model_dir(flag: str, name: str) -> None:
    """`name` is the packaged default or a local Hugging Face model directory, as the recipes load it."""
    from models import resolve_model_dir

    try:
        resolve_model_dir(name)
    except FileNotFoundError:
        raise ValueError(
            f"{flag} {name!r} is neither 'default' nor a local Hugging Face model directory (no config.json there)"
        ) from None


def check_local_model_dir(flag: str, path: str) -> None:
    """A local Hugging Face model directory (no packaged alias stands for it)."""
    if not (Path(path).expanduser() / "config.json").is_file():
        raise ValueError(f"{flag} {path!r} is not a local Hugging Face model directory (no config.json there)")


def check_pair_sources(sources: Sequence[str]) -> None:
    """`--pairs` is given, and each source is `qrels:<beir dir>[:split]` or `mine:<beir dir|jsonl>` that exists."""
    if not sources:
        raise ValueError("--pairs is required: qrels:<beir dir>[:split] and/or mine:<beir dir|jsonl> (repeatable)")
    for source in sources:
        kind, _, rest = source.partition(":")
        path = rest.partition(":")[0] if kind == "qrels" else rest
        if kind not in PAIR_KINDS or not path:
            raise ValueError(f"--pairs {source!r}: use qrels:<beir dir>[:split] or mine:<beir dir|jsonl>")
        if not Path(path).exists():
            raise ValueError(f"--pairs {source!r}: {path} does not exist")
        if kind == "qrels":  # the split is read after the models load: a missing one must stop the run here
            split = rest.partition(":")[2] or "train"
            if not (Path(path) / "qrels" / f"{split}.tsv").is_file():
                raise ValueError(f"--pairs {source!r}: {path} has no qrels/{split}.tsv (the split, default train)")


def check_training_ranges(ns: Mapping[str, Any]) -> None:
    """The HF TrainingArguments flags that HF itself takes as they come: `--max_steps 0` would run one step,
    and a negative learning rate trains away from the data."""
    if not ns["learning_rate"] > 0:
        raise ValueError(f"--learning_rate must be > 0, got {ns['learning_rate']}")
    if ns["max_steps"] == 0 or ns["max_steps"] < -1:
        raise ValueError(f"--max_steps must be >= 1 (or -1: --num_train_epochs decides), got {ns['max_steps']}")
    if not ns["num_train_epochs"] > 0:
        raise ValueError(f"--num_train_epochs must be > 0, got {ns['num_train_epochs']}")
    for name in ("warmup_steps", "weight_decay", "max_grad_norm"):
        if ns[name] < 0:
            raise ValueError(f"--{name} must be >= 0, got {ns[name]}")


def check_finite(values: Mapping[str, Any]) -> None:
    """Every float value (and every float in a list) is a number: `float()` reads 'nan' and 'inf', and NaN
    passes every `x <= 0` style range check (each comparison is false), so a NaN temperature or learning rate
    would train to NaN weights and save them. Checked once here for every recipe and HF flag."""
    for name, value in values.items():
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"--{name} must be a finite number, got {item}")


def check_out_dir(out: str) -> None:
    """`--out` is a folder, or can be made one: an existing file there, or a file or unwritable folder above
    it, would otherwise fail only when the trained model is saved, after all the work."""
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"--out {out!r} is a file, not a folder")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"--out {out!r}: {parent} is a file, so no folder can be made under it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out!r}: {parent} is not writable")


def model_config(path: str | Path) -> dict[str, Any]:
    """The config.json of a model folder as a dict ({} when there is none or it does not parse): what can be
    judged of a model without loading it (read as the registry reads it, models/model_folder.py)."""
    from models.model_folder import InvalidModelDir, read_config

    try:
        return read_config(Path(path).expanduser())
    except InvalidModelDir:
        return {}


# The models' names for one setting: BERT-style first, then GPT-2's.
_POSITIONS_KEYS = ("max_position_embeddings", "n_positions")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
# RoBERTa-style position ids start after the padding index, so two of the table's positions are never used.
_OFFSET_POSITIONS = {"roberta": 2, "xlm-roberta": 2, "camembert": 2, "longformer": 2}


def _first_int(config: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    for key in keys:
        if isinstance(config.get(key), int):
            return int(config[key])
    return None


def position_limit(config: Mapping[str, Any]) -> int | None:
    """The most tokens the model's position table holds (None: no such table, e.g. Mamba)."""
    table = _first_int(config, _POSITIONS_KEYS)
    if table is None:
        return None
    return table - _OFFSET_POSITIONS.get(str(config.get("model_type")), 0)


def hidden_size(config: Mapping[str, Any]) -> int | None:
    return _first_int(config, _HIDDEN_KEYS)


def fit_max_length(args: Any, name: str, config: Mapping[str, Any], *, model_flag: str, low: int = 8) -> None:
    """`args.<name>` (tokens) is at least `low` and fits the model's position table: past it the model fails
    with an index error mid-training. A value given above the limit is refused; the recipe's default (when the
    model is smaller than it) is brought down to the limit, so that small models train with the defaults."""
    value = getattr(args, name)
    if value < low:
        raise ValueError(f"--{name} must be >= {low} tokens, got {value}")
    limit = position_limit(config)
    if limit is None or value <= limit:
        return
    default = next(f.default for f in dataclasses.fields(args) if f.name == name)
    if value == default:
        setattr(args, name, limit)
        return
    raise ValueError(f"--{name} {value} is more than {model_flag}'s {limit} positions (max_position_embeddings)")
