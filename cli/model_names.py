"""How an offline command names a model: one resolver for `vela eval --embedder` and `--rerank`, `vela ingest
--embedder` and `vela adapt --student`, so that each takes the same names and refuses the same things in the same
words, before any work (one line, exit 2, nothing made).

A model is a registered name (`vela models list`), a built-in name (`default` and its aliases, an embedder), or a
model folder. A word that is both a registered name and a folder here is the registered model, as the server would
read it: `./WORD` names the folder (a name never holds a '/'). The registry is the data directory's, the one
`vela models` shows (cli.models.models_dir), so a name means here what it means to a server on that directory.

`vela reindex` takes registered names only (the server records the model by its name): `registered_only` says
what to do with a folder.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from cli.models import models_dir

LIST_HINT = "`vela models list` shows them"


@dataclass(frozen=True)
class ModelChoice:
    given: str  # as the user named it: what results and records call the model (never a registry path)
    load: str  # what the model caches load: a built-in name as it is, else the model's folder, absolute
    kind: str  # "embedder" or "reranker"
    registered: bool = False  # `given` is a registry name


class ModelRefused(ValueError):
    """The name is no model of the kind wanted: the message is the one line the command prints."""


def resolve_model(name: str, *, kind: str, flag: str, registry: Path | None = None) -> ModelChoice:
    """`name` as the model caches load it. ModelRefused for a name that is neither registered nor a folder, a
    registered model or a folder that is not a whole model (config.json and weights, as `vela models add` judges
    one), and a model of the other kind. `registry`: the registry folder (default `models_dir()`)."""
    from models.registry import BUILTIN_NAMES, InvalidModelDir, ModelRegistry, UnknownModel

    if name in BUILTIN_NAMES:
        if kind != "embedder":
            raise _refused(flag, name, f"is the built-in embedder, not {_a(kind)} {kind}")
        return ModelChoice(name, name, kind)
    try:
        folder = ModelRegistry(registry or models_dir()).get(name).path
    except UnknownModel:
        folder = None
    except InvalidModelDir as e:
        raise _refused(flag, name, f"is a registered model that cannot be used: {e}") from None
    registered = folder is not None
    if folder is None:
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise _refused(flag, name, f"is neither a registered model ({LIST_HINT}) nor a model directory")
    found = _kind_of_folder(folder, flag, name)
    if found != kind:
        raise _refused(flag, name, f"is {_a(found)} {found}, not {_a(kind)} {kind}")
    return ModelChoice(name, str(folder.resolve()), kind, registered)


def _kind_of_folder(folder: Path, flag: str, name: str) -> str:
    from models.registry import InvalidModelDir, check_weights, kind_of, read_config

    try:
        config = read_config(folder)
        check_weights(folder)  # a folder without weights would load nothing, and fail only inside the job
    except InvalidModelDir as e:
        raise _refused(flag, name, f"is not a model directory: {e}") from None
    return kind_of(config)


def registered_only(name: str, *, flag: str, registry: Path | None = None) -> str | None:
    """Why `name` cannot be given where a registered name is wanted (None: a built-in or registered name; its kind
    is the command's to check). A folder is told how to become a name."""
    from models.registry import BUILTIN_NAMES, ModelRegistry

    if name in BUILTIN_NAMES or name in ModelRegistry(registry or models_dir()).names():
        return None
    if Path(name).expanduser().is_dir():
        return (
            f"{flag}: {name!r} is a folder, and this command takes a registered model's name (it is recorded by "
            f"name): register the folder with `vela models add NAME {shlex.quote(name)}`, then give NAME"
        )
    return f"{flag}: no registered model named {name!r} ({LIST_HINT})"


def _refused(flag: str, name: str, why: str) -> ModelRefused:
    return ModelRefused(f"{flag}: {name!r} {why}")


def _a(kind: str) -> str:
    return "an" if kind[:1] in "aeiou" else "a"


# The recipe flags of `vela train` that name a model to start from. A recipe checks its own (a folder, or `default`);
# a registered name is turned into its folder here, first, so that training takes the same names as the rest.
TRAIN_MODEL_FLAGS = ("--model", "--backbone", "--first_stage", "--lm", "--surrogate")


def train_args_with_folders(argv: list[str], registry: Path | None = None) -> list[str]:
    """A recipe's argv with each registered model name after a model flag replaced by the model's folder; anything
    else (a folder, `default`, an unknown word the recipe will refuse in its own words) is left as it is."""
    from models.registry import ModelRegistry, UnknownModel

    models = ModelRegistry(registry or models_dir())

    def folder(value: str) -> str:
        if "/" in value or Path(value).expanduser().is_dir():
            return value
        try:
            path = models.get(value).path
        except (UnknownModel, ValueError):
            return value
        return value if path is None else str(path.resolve())  # a built-in name: the recipe knows it

    out: list[str] = []
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if eq and flag in TRAIN_MODEL_FLAGS:
            out.append(f"{flag}={folder(value)}")
        elif i > 0 and argv[i - 1] in TRAIN_MODEL_FLAGS and not arg.startswith("-"):
            out.append(folder(arg))
        else:
            out.append(arg)
    return out
