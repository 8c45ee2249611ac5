"""Checks the recipes' argument dataclasses run as they are built, so that a wrong path stops `vela train`
before any data is read, with a message that names the flag the user typed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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
