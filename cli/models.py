"""`vela models add|list|remove|add-eval`, and `vela train ... --register NAME`: the model registry from the shell.

The registry is VELA_MODELS_DIR, else `<VELA_DATA_DIR or .vela>/models`, the folder the API serves names from.
argparse only at import: the registry (and with it torch) is imported when a command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def models_dir(given: str | None = None) -> Path:
    if given:
        return Path(given)
    if os.environ.get("VELA_MODELS_DIR"):
        return Path(os.environ["VELA_MODELS_DIR"])
    return Path(os.environ.get("VELA_DATA_DIR") or ".vela") / "models"


def add_parser(sub: Any) -> None:
    """The `models` subcommand and its own subcommands, on `vela`'s subparsers."""
    models = sub.add_parser("models", help="the model registry: the names requests may use (VELA_MODELS_DIR)")
    models.add_argument("--models-dir", default=None, help="default VELA_MODELS_DIR, else <data dir>/models")
    cmds = models.add_subparsers(dest="models_command", required=True)
    add = cmds.add_parser("add", help="copy a model directory into the registry under NAME")
    add.add_argument("name", help="1-64 letters, digits, '-', '_' or '.', not starting with '.'")
    add.add_argument("path", help="the model directory (e.g. a `vela train ... --out` folder)")
    add.set_defaults(func=_add)
    ls = cmds.add_parser("list", help="every model: name, kind, dims, when added, where from")
    ls.add_argument("--json", action="store_true", help="the full entries as JSON (training args and evals too)")
    ls.set_defaults(func=_list)
    rm = cmds.add_parser("remove", help="delete a model from the registry")
    rm.add_argument("name")
    rm.add_argument("--force", action="store_true", help="even if a collection of the data directory uses it")
    rm.set_defaults(func=_remove)
    ev = cmds.add_parser("add-eval", help="record an evaluation (e.g. `vela eval --json` output) for a model")
    ev.add_argument("name")
    ev.add_argument("file", help="a JSON object")
    ev.add_argument("--label", default=None, help="what to call it (default the file's name)")
    ev.set_defaults(func=_add_eval)


def _registry(args: argparse.Namespace) -> Any:
    from models.registry import ModelRegistry

    return ModelRegistry(models_dir(args.models_dir))


def _fail(message: str) -> int:
    print(f"vela models: {message}", file=sys.stderr)
    return 2


def _add(args: argparse.Namespace) -> int:
    from models.registry import InvalidModelDir, InvalidModelName, ModelExists

    try:
        entry = _registry(args).register(args.name, args.path)
    except (InvalidModelName, ModelExists, InvalidModelDir) as exc:
        return _fail(str(exc))
    print(json.dumps({"name": entry.name, "kind": entry.kind, "dims": entry.dims, "path": str(entry.path)}))
    return 0


def _list(args: argparse.Namespace) -> int:
    entries = _registry(args).entries()
    if args.json:
        rows = [{**e.public(), "path": str(e.path) if e.path else None, "source": e.source} for e in entries]
        print(json.dumps(rows, indent=2))
        return 0
    import time

    for e in entries:
        added = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.created_at)) if e.created_at else "built in"
        print(f"{e.name:<24} {e.kind:<9} {e.dims or '-':>5}  {added:<16} {e.source or ''}")
    return 0


def collections_using(data_dir: Path, model_dir: Path) -> list[str]:
    """Collections of `data_dir` whose settings name `model_dir` as their embedder."""
    out = []
    for settings in sorted((data_dir / "collections").glob("*/collection.json")):
        try:
            embedder = json.loads(settings.read_text()).get("embedder")
        except (OSError, ValueError, AttributeError):
            continue
        if embedder and Path(embedder) == model_dir:
            out.append(settings.parent.name)
    return out


def _remove(args: argparse.Namespace) -> int:
    from models.registry import InvalidModelDir, InvalidModelName, UnknownModel

    registry = _registry(args)
    try:
        path = registry.root / args.name
        users = collections_using(Path(os.environ.get("VELA_DATA_DIR") or ".vela"), path)
        if users and not args.force:
            return _fail(f"collections {users} use {args.name!r}: delete them first, or pass --force")
        registry.remove(args.name)
    except UnknownModel:
        return _fail(f"no registered model named {args.name!r}")
    except (InvalidModelName, InvalidModelDir) as exc:
        return _fail(str(exc))
    print(f"removed {args.name}")
    return 0


def _add_eval(args: argparse.Namespace) -> int:
    from models.registry import InvalidModelName, UnknownModel

    try:
        result = json.loads(Path(args.file).read_text())
        stem = _registry(args).add_eval(args.name, result, label=args.label or Path(args.file).stem)
    except UnknownModel:
        return _fail(f"no registered model named {args.name!r}")
    except (OSError, ValueError, InvalidModelName) as exc:
        return _fail(f"{args.file}: {exc}")
    print(f"recorded {args.name}/evals/{stem}.json")
    return 0


# --- vela train ... --register NAME ------------------------------------------------------------------------------
def take_register_flag(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """A recipe's argv without `--register NAME` (or `--register=NAME`), and the name."""
    rest: list[str] = []
    name: str | None = None
    items = list(argv)
    i = 0
    while i < len(items):
        arg = items[i]
        if arg == "--register":
            if i + 1 >= len(items):
                raise ValueError("--register needs a name")
            name = items[i + 1]
            i += 2
            continue
        if arg.startswith("--register="):
            name = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return rest, name


def check_register_name(name: str) -> str | None:
    """Why `name` cannot be registered (checked before training, not after it); None when it can."""
    from models.registry import BUILTIN_NAMES, is_model_name

    if not is_model_name(name) or name in BUILTIN_NAMES:
        return f"--register: {name!r} is not a name a model can take (1-64 letters, digits, '-', '_', '.')"
    if os.path.lexists(models_dir() / name):
        return f"--register: a model named {name!r} is registered already"
    return None


def output_dir(argv: Sequence[str]) -> Path | None:
    """Where a recipe writes its model: `--out` (or `--output_dir`), a config file's included."""
    from training.cli_args import expand_config

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--out")
    parser.add_argument("--output_dir")
    known, _ = parser.parse_known_args(expand_config(argv))
    out = known.out or known.output_dir
    return Path(out) if out else None


def register_trained(name: str, argv: Sequence[str]) -> int:
    """After a recipe succeeded: copy its output folder into the registry as `name`."""
    from models.registry import InvalidModelDir, InvalidModelName, ModelExists, ModelRegistry

    out = output_dir(argv)
    if out is None:
        return _fail("--register: the recipe's --out folder is unknown")
    try:
        entry = ModelRegistry(models_dir()).register(name, out)
    except (InvalidModelName, ModelExists, InvalidModelDir) as exc:
        return _fail(f"--register: {exc}")
    print(json.dumps({"registered": entry.name, "kind": entry.kind, "dims": entry.dims}))
    return 0
