"""The model registry: named model directories under one folder, the only way an API request names a model.

`<models dir>/<name>/` holds one model, copied in whole by `register` (a temp folder, then one rename), with
`vela_registry.json` (its kind and when it was added), the `training_args.json` a trainer saved beside its weights,
if any, and `evals/*.json`, evaluation results recorded for it. `default` and its aliases name the packaged MiniLM
and live nowhere in the folder.

A name is resolved without ever building a path from anything but a registered name: a name that is not 1-64
letters, digits, `-`, `_` or `.` (not starting with a dot), is not in the folder, is a symlink, or holds a symlink
is `UnknownModel`, all alike, so a caller cannot tell one from another or make the process look anywhere else.

What a name may be and the registry's errors live in models/registry_names.py, what an entry records in
models/registry_entries.py; both are re-exported here, the module callers import.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import time
import uuid
from pathlib import Path
from typing import Any

from models.model_folder import (
    RERANKER_MODEL_TYPE,
    InvalidModelDir,
    check_readable_weights,
    check_weights,
    dims_of,
    kind_of,
    read_config,
)
from models.registry_entries import (
    ENTRY_FILE,
    EVALS_DIR,
    TRAINING_FILE,
    ModelEntry,
    builtin_entry,
    eval_results,
    json_object,
    training_record,
)
from models.registry_names import (
    BUILTIN_ALIASES,
    BUILTIN_NAME,
    BUILTIN_NAMES,
    KINDS,
    InvalidModelName,
    ModelExists,
    UnknownModel,
    WrongModelKind,
    is_model_name,
    name_refusal,
)
from velaio.files import file_lock, fsync_dir, fsync_tree, write_atomic

LOCK_FILE = ".registry.lock"
# A trainer's output folder may also hold checkpoints and TensorBoard logs; the served model needs neither.
COPY_IGNORE = shutil.ignore_patterns("checkpoint-*", "runs", ".*")


class ModelRegistry:
    """The models under one folder (VELA_MODELS_DIR, default `<data dir>/models`)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        # Resolved once, here: an entry is `root / name` with a checked name, so nothing later needs realpath.
        self.root = Path(root).expanduser().resolve()

    # --- lookups: what a request may name ------------------------------------------------------------------
    def _entry_dir(self, name: str) -> Path:
        """The folder of a registered model; UnknownModel for anything else, before any path is touched."""
        if not is_model_name(name):
            raise UnknownModel()
        path = self.root / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise UnknownModel() from None
        # A symlinked entry could point anywhere on the server: refused, never followed.
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode) or _holds_symlink(path):
            raise UnknownModel()
        return path

    def resolve(self, name: str, *, kind: str) -> str:
        """What the model caches load for `name`: a built-in name as it is, or a registered model's directory.

        UnknownModel for every name that is not registered; WrongModelKind for a model of the other kind."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if isinstance(name, str) and name in BUILTIN_NAMES:
            if kind != "embedder":
                raise WrongModelKind(f"{name!r} is an embedder, not a reranker")
            return name
        path = self._entry_dir(name)
        found = kind_of(read_config(path))
        if found != kind:
            raise WrongModelKind(f"{name!r} is {_article(found)} {found}, not {_article(kind)} {kind}")
        return str(path)

    def get(self, name: str) -> ModelEntry:
        if isinstance(name, str) and name in BUILTIN_NAMES:
            return builtin_entry()
        root = self._entry_dir(name)
        config = read_config(root)
        kind = kind_of(config)
        meta = json_object(root / ENTRY_FILE) or {}
        created = meta.get("created_at")
        if not isinstance(created, int | float):
            created = root.stat().st_mtime  # placed by hand, not by `register`
        source = meta.get("source") if isinstance(meta.get("source"), str) else None
        return ModelEntry(
            name=name,
            kind=kind,
            dims=dims_of(config) if kind == "embedder" else None,
            created_at=float(created),
            path=root,
            source=source,
            training=training_record(root),
            evals=eval_results(root),
        )

    def names(self) -> list[str]:
        """Registered names (the built-in aside), sorted; entries that are symlinks are not models."""
        try:
            with os.scandir(self.root) as it:
                return sorted(e.name for e in it if is_model_name(e.name) and e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def entries(self) -> list[ModelEntry]:
        """The built-in first, then every registered model that is whole, as `register` judges a model folder (a
        broken entry, or a folder without weights put there by hand, is left out, not fatal)."""
        out = [builtin_entry()]
        for name in self.names():
            try:
                entry = self.get(name)
                check_weights(self.root / name)
            except (UnknownModel, InvalidModelDir):
                continue
            out.append(entry)
        return out

    def model_dir(self, name: str) -> Path:
        """The folder of the registered model `name`, judged as `register` and `entries` judge one (a config.json
        that is a JSON object, and weights). UnknownModel when there is no such folder (or it is a symlink),
        InvalidModelName for a built-in name, InvalidModelDir for a folder that is not a model: the registry
        folder may be shared with other things (a data directory's `collections/`, say), never a model's to take."""
        if isinstance(name, str) and name in BUILTIN_NAMES:
            raise InvalidModelName(f"{name!r} is built in and cannot be removed")
        path = self._entry_dir(name)
        try:
            read_config(path)
            check_weights(path)
        except InvalidModelDir as exc:
            raise InvalidModelDir(f"{name!r} is not a model ({exc}), so it is not listed") from None
        return path

    # --- changes: the operator's (CLI), never a request's ----------------------------------------------------
    def register(self, name: str, source: str | os.PathLike[str]) -> ModelEntry:
        """Copy the model directory `source` in as `name`: into a temp folder beside the entries, fsynced, then
        renamed into place, so an entry is whole or absent. Symlinks in `source` are copied as the files they
        point at; checkpoints, `runs/` and hidden files are left behind."""
        refusal = name_refusal(name)
        if refusal is not None:
            raise (ModelExists if name in BUILTIN_NAMES else InvalidModelName)(refusal)
        src = Path(source).expanduser()
        if not src.is_dir():
            raise InvalidModelDir(f"{str(source)!r} is not a directory")
        config = read_config(src)
        check_weights(src)
        check_readable_weights(src)
        self.root.mkdir(parents=True, exist_ok=True)
        with file_lock(self.root / LOCK_FILE):
            self._sweep_locked()
            dest = self.root / name
            if os.path.lexists(dest):
                raise ModelExists(f"a model named {name!r} is registered already (remove it first)")
            tmp = self.root / f".tmp-{uuid.uuid4().hex}"
            try:
                shutil.copytree(src, tmp, symlinks=False, ignore=COPY_IGNORE)
                meta = {"name": name, "kind": kind_of(config), "created_at": time.time(), "source": str(src.resolve())}
                (tmp / ENTRY_FILE).write_text(json.dumps(meta, indent=2))
                fsync_tree(tmp)
                os.rename(tmp, dest)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            fsync_dir(self.root)
        return self.get(name)

    def _sweep_locked(self) -> None:
        """Remove what a killed `register` or `remove` left: a copy that was never renamed into place, or a removed
        model's files not yet deleted. Under the registry lock, which each holds while its copy exists, any such
        folder but a removal being deleted right now is a leftover (and deleting that one twice is harmless)."""
        for pattern in (".tmp-*", ".removed-*"):
            for leftover in self.root.glob(pattern):
                shutil.rmtree(leftover, ignore_errors=True)

    def remove(self, name: str) -> None:
        """Take the model `name` out of the registry: renamed aside first (gone at once), then its files deleted.
        Only a model is removed (`model_dir`'s errors otherwise, and nothing is touched)."""
        self.model_dir(name)  # before the lock: a missing registry folder is not created to refuse a name
        with file_lock(self.root / LOCK_FILE):
            self._sweep_locked()
            path = self.model_dir(name)  # again under the lock: what is renamed is what was judged
            trash = self.root / f".removed-{uuid.uuid4().hex}"
            os.rename(path, trash)
            fsync_dir(self.root)
        shutil.rmtree(trash, ignore_errors=True)

    def add_eval(self, name: str, result: Any, *, label: str) -> str:
        """Record an evaluation result (a JSON object, e.g. `vela eval --json` output) for a registered model; the
        name it is stored under (`evals/<UTC time>-<label>.json`)."""
        if not isinstance(result, dict):
            raise ValueError(f"an eval result is a JSON object, not a {type(result).__name__}")
        if name in BUILTIN_NAMES:
            raise InvalidModelName("the built-in model is not in the registry folder: register a copy to record evals")
        root = self._entry_dir(name)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-.") or "eval"
        stem = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{safe[:48]}"
        (root / EVALS_DIR).mkdir(exist_ok=True)
        write_atomic(root / EVALS_DIR / f"{stem}.json", (json.dumps(result, indent=2) + "\n").encode())
        return stem


def _holds_symlink(root: Path) -> bool:
    """Whether anything inside `root` is a symlink (which the registry's own copies never hold)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for n in (*dirnames, *filenames):
            if os.path.islink(os.path.join(dirpath, n)):
                return True
    return False


# Names other modules import from here, defined in models/registry_names.py and models/registry_entries.py.
__all__ = [
    "BUILTIN_ALIASES",
    "BUILTIN_NAME",
    "BUILTIN_NAMES",
    "ENTRY_FILE",
    "EVALS_DIR",
    "KINDS",
    "RERANKER_MODEL_TYPE",
    "TRAINING_FILE",
    "InvalidModelDir",
    "InvalidModelName",
    "ModelEntry",
    "ModelExists",
    "ModelRegistry",
    "UnknownModel",
    "WrongModelKind",
    "check_weights",
    "dims_of",
    "is_model_name",
    "kind_of",
    "name_refusal",
    "read_config",
]


def _article(kind: str) -> str:
    return "an" if kind[:1] in "aeiou" else "a"
