"""`ModelEntry`: what the registry tells of one model, and the readers of what a model folder records beside its
weights (the registry's own record, the trainer's arguments, evaluation results).

Split from models/registry.py, which re-exports `ModelEntry`: the registry finds and changes entries, this module
only describes one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.loading import packaged_minilm_dir
from models.model_folder import InvalidModelDir, dims_of, read_config
from models.registry_names import BUILTIN_ALIASES, BUILTIN_NAME

ENTRY_FILE = "vela_registry.json"
TRAINING_FILE = "training_args.json"  # what every `vela train` recipe writes beside its weights
EVALS_DIR = "evals"


def json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`; None for a missing or unreadable file, or JSON that is not an object."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class ModelEntry:
    name: str
    kind: str
    dims: int | None
    created_at: float | None
    path: Path | None  # None for the built-in; server-side only, never shown to API callers
    builtin: bool = False
    aliases: tuple[str, ...] = ()
    source: str | None = None  # the directory it was copied from (for the operator's `vela models list`)
    training: dict[str, Any] | None = None
    evals: list[dict[str, Any]] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        """What GET /models shows: no server paths."""
        return {
            "name": self.name,
            "kind": self.kind,
            "dims": self.dims,
            "created_at": self.created_at,
            "builtin": self.builtin,
            "aliases": list(self.aliases),
            "training": self.training,
            "evals": self.evals,
        }


def builtin_entry() -> ModelEntry:
    try:
        dims = dims_of(read_config(packaged_minilm_dir()))
    except (FileNotFoundError, InvalidModelDir):
        dims = None
    return ModelEntry(BUILTIN_NAME, "embedder", dims, None, None, builtin=True, aliases=BUILTIN_ALIASES)


def training_record(root: Path) -> dict[str, Any] | None:
    """The arguments the trainer saved in the model folder `root`, without its per-step log."""
    record = json_object(root / TRAINING_FILE)
    if record is None:
        return None
    record.pop("log_history", None)  # every logged step: long, and the evals say how the model does
    return record


def eval_results(root: Path) -> list[dict[str, Any]]:
    """The evaluation results recorded for the model folder `root` (`evals/*.json`), by file name."""
    folder = root / EVALS_DIR
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        result = json_object(path)
        if result is not None:
            out.append({"name": path.stem, "result": result})
    return out
