"""The model registry as the API sees it: GET /models, and the request fields that name a model (no HTTP here).

A request names a model only by registry name (`default` included). Whatever else it sends, a path, `..`, `~`,
a NUL, a percent-encoding, an overlong string, a name nobody registered, gets one error with one fixed message
per field, which echoes nothing, so that no request can make the server open a directory of its choosing or
learn which paths exist. The server's own settings (VELA_EMBEDDER, VELA_RERANKER) are the operator's and may
still be directories: they never pass through here.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from indexing.collection_settings import REGISTRY_FOLDER
from models.loading import packaged_minilm_dir
from models.registry import (
    BUILTIN_NAME,
    BUILTIN_NAMES,
    InvalidModelDir,
    ModelRegistry,
    UnknownModel,
    WrongModelKind,
    is_model_name,
)
from service.settings import Settings


class UnknownModelName(ValueError):
    """A request's model field names no registered model (the message is fixed per field)."""


class ModelKindMismatch(ValueError):
    """A registered model of the other kind (an embedder named as a reranker, or the reverse)."""


class UnusableModel(ValueError):
    """A registered model whose directory the server cannot use (e.g. a config.json that is not an object)."""


def unknown_model_message(field: str) -> str:
    return f"{field}: no registered model of that name (GET /models lists them)"


def models_dir(settings: Settings) -> Path:
    """VELA_MODELS_DIR, else `<data dir>/models`."""
    return settings.models_dir if settings.models_dir is not None else settings.data_dir / REGISTRY_FOLDER


@lru_cache(maxsize=8)
def _registry_at(root: Path) -> ModelRegistry:
    return ModelRegistry(root)  # resolves the folder once per process, not once per request


def registry(settings: Settings) -> ModelRegistry:
    return _registry_at(models_dir(settings))


def list_models(*, settings: Settings) -> list[dict[str, Any]]:
    """Every model a request may name: the built-in default, then the registered ones (no server paths)."""
    return [e.public() for e in registry(settings).entries()]


def request_model(*, settings: Settings, name: str, kind: str, field: str) -> str:
    """What the model caches load for a model a request names: a built-in name, or a registered model's folder.

    `field` is the request field (`embedder`, `rerank.model`), named in the error."""
    try:
        return registry(settings).resolve(name, kind=kind)
    except UnknownModel as exc:
        raise UnknownModelName(unknown_model_message(field)) from exc
    except WrongModelKind as exc:
        raise ModelKindMismatch(f"{field}: {exc}") from exc
    except InvalidModelDir as exc:
        raise UnusableModel(f"{field}: registered model {name!r} cannot be used: {exc}") from exc


UNREGISTERED = "unregistered"  # a collection's model that no name reaches (e.g. registered and since removed)


class ModelUnavailable(ValueError):
    """A collection's model does not load here (its folder was removed or damaged): 409 model_unavailable."""


def model_unavailable(*, settings: Settings, stored: str, exc: BaseException, what: str) -> ModelUnavailable:
    """The error for a collection whose model (`stored`) raised `exc` when loaded, for `what` the request wanted. It
    names the registry name the model had when that is known, so that the operator knows what to register again."""
    name = public_model_name(settings=settings, stored=stored)
    path = Path(stored)
    if name == UNREGISTERED and path.parent == registry(settings).root and is_model_name(path.name):
        name = f"{path.name!r}, no longer in the registry"
    return ModelUnavailable(
        f"the collection's model ({name}) does not load on this server ({type(exc).__name__}): {what}; register "
        "the model again (vela models add) or reindex the collection to another model"
    )


def public_model_name(*, settings: Settings, stored: str) -> str:
    """The name clients know a collection's model by. A collection's settings keep what the model caches load
    (a built-in name, or a folder on the server); responses show a built-in or registered name, never a path.

    The name is one a request can use to mean the same model: `default` only for the packaged MiniLM, which is what
    `default` in a request loads. A folder the server was configured with (VELA_EMBEDDER) that is not in the
    registry is `unregistered`: calling it `default` would have a reindex to `default` change the model."""
    if stored in BUILTIN_NAMES:
        return stored
    path = Path(stored)
    if path == packaged_minilm_dir():
        return BUILTIN_NAME
    if path.parent == registry(settings).root and is_model_name(path.name) and path.is_dir():
        return path.name  # (a folder removed with `vela models remove --force` is a name that reaches nothing)
    return UNREGISTERED


def shown_model_name(*, settings: Settings, stored: str, recorded: str | None) -> str:
    """The name a generation's model is shown by: the registered name it was reindexed with (`recorded`) while that
    name still reaches the very folder the generation serves from, else `public_model_name`. So a name whose model
    was removed (or registered again, with other weights) is never shown for the old folder, and a built-in alias
    (`minilm`) shows as `default`, the one name of the packaged model."""
    if recorded and recorded not in BUILTIN_NAMES and is_model_name(recorded):
        folder = registry(settings).root / recorded
        try:
            if folder.is_dir() and folder.resolve() == Path(stored).resolve():
                return recorded
        except OSError:
            pass
    return public_model_name(settings=settings, stored=stored)


__all__ = [
    "ModelKindMismatch",
    "UnknownModelName",
    "UnusableModel",
    "list_models",
    "models_dir",
    "public_model_name",
    "registry",
    "request_model",
    "shown_model_name",
    "unknown_model_message",
]
