"""`vela models add|list|remove|add-eval`, and `vela train ... --register NAME`: the model registry from the shell.

The registry is --models-dir, else VELA_MODELS_DIR, else `<data dir>/models` (--data-dir, else VELA_DATA_DIR, else
.vela): the folder the API serves names from, found the way the API finds it. argparse only at import: the registry
(and with it torch) is imported when a command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cli.stdout import write


def data_dir(given: str | None = None) -> Path:
    return Path(given or os.environ.get("VELA_DATA_DIR") or ".vela")


def models_dir(given: str | None = None, *, data: str | None = None) -> Path:
    """The registry: `given`, else VELA_MODELS_DIR, else `<data dir>/models` (`data`, else VELA_DATA_DIR or .vela),
    as the API's settings pick it (a server and `vela models` on one data directory see one registry)."""
    if given:
        return Path(given)
    if os.environ.get("VELA_MODELS_DIR"):
        return Path(os.environ["VELA_MODELS_DIR"])
    return data_dir(data) / "models"


def model_dims(load: str) -> int | None:
    """The width of the vectors an embedder makes, from its config.json, without loading it (`load`: a built-in
    name or a folder, as cli/model_names.py resolves them); None where its config does not say."""
    from models.model_dirs import packaged_minilm_dir
    from models.model_folder import InvalidModelDir, dims_of, read_config
    from models.registry import BUILTIN_NAMES

    try:
        return dims_of(read_config(packaged_minilm_dir() if load in BUILTIN_NAMES else Path(load)))
    except InvalidModelDir:
        return None  # loading it says what is wrong with it


def add_parser(sub: Any) -> None:
    """The `models` subcommand and its own subcommands, on `vela`'s subparsers."""
    models = sub.add_parser("models", help="the model registry: the names requests may use (VELA_MODELS_DIR)")
    _add_dir_flags(models, default=None)
    # The same flags after the subcommand too (`vela models remove m --data-dir D`, as `vela reindex` takes it);
    # there they default to "not given", so that they do not undo the ones given before it.
    dirs = argparse.ArgumentParser(add_help=False)
    _add_dir_flags(dirs, default=argparse.SUPPRESS)
    cmds = models.add_subparsers(dest="models_command", required=True)
    add = cmds.add_parser("add", parents=[dirs], help="copy a model directory into the registry under NAME")
    add.add_argument("name", help="1-64 letters, digits, '-', '_' or '.', not starting with '.'")
    add.add_argument("path", help="the model directory (e.g. a `vela train ... --out` folder)")
    add.set_defaults(func=_add)
    ls = cmds.add_parser("list", parents=[dirs], help="every model: name, kind, dims, when added, where from")
    ls.add_argument("--json", action="store_true", help="the full entries as JSON (training args and evals too)")
    ls.set_defaults(func=_list)
    rm = cmds.add_parser("remove", parents=[dirs], help="delete a model from the registry")
    rm.add_argument("name")
    rm.add_argument("--force", action="store_true", help="even if a collection of the data directory uses it")
    rm.set_defaults(func=_remove)
    ev = cmds.add_parser("add-eval", parents=[dirs], help="record an evaluation (`vela eval --json`) for a model")
    ev.add_argument("name")
    ev.add_argument("file", help="a JSON object")
    ev.add_argument("--label", default=None, help="what to call it (default the file's name)")
    ev.set_defaults(func=_add_eval)


def _add_dir_flags(parser: argparse.ArgumentParser, *, default: Any) -> None:
    parser.add_argument("--data-dir", default=default, help="data directory (default VELA_DATA_DIR or ./.vela)")
    parser.add_argument("--models-dir", default=default, help="default VELA_MODELS_DIR, else <data dir>/models")


def _registry(args: argparse.Namespace) -> Any:
    from models.registry import ModelRegistry

    return ModelRegistry(models_dir(args.models_dir, data=args.data_dir))


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
        return write(json.dumps(rows, indent=2) + "\n")
    import time

    lines = []
    for e in entries:
        added = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.created_at)) if e.created_at else "built in"
        lines.append(f"{e.name:<24} {e.kind:<9} {e.dims or '-':>5}  {added:<16} {e.source or ''}\n")
    return write("".join(lines))


def collections_using(data: Path, model_dir: Path) -> list[str]:
    """Collections of the data directory `data` with a generation that embeds with `model_dir`: the one searches
    read, the one kept for rollback and the one being built (a rollback or a promotion makes either serve)."""
    from indexing.generations import gen_root

    target = model_dir.resolve()
    root = data / "collections"
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return [f.name for f in folders if any(_embedder_of(gen_root(f, g)) == target for g in _kept_generations(f))]


def _kept_generations(collection: Path) -> set[int]:
    from indexing.generations import GEN_DIR, read_pointer

    try:
        return read_pointer(collection).kept()
    except (OSError, ValueError, TypeError):
        # A pointer that does not read names nothing for sure: every generation on disk may be one that serves.
        gens = collection / GEN_DIR
        return {0, *(int(p.name) for p in (gens.iterdir() if gens.is_dir() else ()) if p.name.isdigit())}


def _embedder_of(generation: Path) -> Path | None:
    """The model folder a generation's settings record, resolved (None for a built-in name or unreadable settings)."""
    from indexing.collection_settings import SETTINGS_FILE
    from models.registry import BUILTIN_NAMES

    try:
        embedder = json.loads((generation / SETTINGS_FILE).read_text()).get("embedder")
        if not isinstance(embedder, str) or embedder in BUILTIN_NAMES:
            return None
        return Path(embedder).expanduser().resolve()
    except (OSError, ValueError, AttributeError, RuntimeError):  # RuntimeError: a symlink loop
        return None


def _remove(args: argparse.Namespace) -> int:
    from models.registry import InvalidModelDir, InvalidModelName, UnknownModel

    registry = _registry(args)
    try:
        path = registry.model_dir(args.name)
        users = collections_using(data_dir(args.data_dir), path)
        if users and not args.force:
            named = ", ".join(repr(u) for u in users)
            who = ("collection", "uses", "it") if len(users) == 1 else ("collections", "use", "them")
            return _fail(
                f"{who[0]} {named} {who[1]} {args.name!r} (a generation that serves, is kept for rollback or is "
                f"being built): reindex {who[2]} to another model (vela reindex) or delete {who[2]} first, or pass "
                "--force"
            )
        registry.remove(args.name)
    except UnknownModel:
        return _fail(f"no registered model named {args.name!r}")
    except (InvalidModelName, InvalidModelDir) as exc:
        return _fail(f"{exc}; nothing removed")
    print(f"removed {args.name}")
    return 0


def _add_eval(args: argparse.Namespace) -> int:
    from models.registry import InvalidModelName, UnknownModel

    try:
        result = json.loads(Path(args.file).read_text())
        stem = _registry(args).add_eval(args.name, result, label=args.label or Path(args.file).stem)
    except UnknownModel:
        return _fail(f"no registered model named {args.name!r}")
    except FileNotFoundError:
        return _fail(f"no file {args.file}")
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


def check_register_name(name: str, *, flag: str = "--register") -> str | None:
    """Why `name` cannot be registered (checked before training, not after it); None when it can. `flag` is the
    option that gave the name: `vela train --register` and `vela adapt --out` both check theirs here, so the two
    refuse the same names in the same words."""
    from models.registry import name_refusal

    refusal = name_refusal(name)
    if refusal is not None:
        return f"{flag}: {refusal}"
    if os.path.lexists(models_dir() / name):
        return f"{flag}: a model named {name!r} is registered already"
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
