"""What a model registry name may be, which names are the built-in model's, and the registry's errors.

Split from models/registry.py so that what judges a name (a request's, an operator's) reads apart from what
copies and reads model folders; models/registry.py re-exports every name here.
"""

from __future__ import annotations

import re

from models.loading import DEFAULT_ALIASES, ONNX_ALIASES, TORCH_ALIASES

KINDS = ("embedder", "reranker")
BUILTIN_NAME = DEFAULT_ALIASES[0]  # "default": the packaged all-MiniLM-L6-v2, served by VELA_ENCODER's choice
# Its other names: DEFAULT_ALIASES (same form as `default`), then the names of its torch and its ONNX int8 form.
BUILTIN_ALIASES = tuple(n for n in (*DEFAULT_ALIASES, *TORCH_ALIASES, *ONNX_ALIASES) if n != BUILTIN_NAME)
BUILTIN_NAMES = frozenset((BUILTIN_NAME, *BUILTIN_ALIASES))
# ASCII classes only (no \w): a Unicode digit or dot look-alike is not a name.
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")


class UnknownModel(LookupError):
    """No registered model of that name (whatever the name looks like: the message never echoes it)."""

    def __init__(self) -> None:
        super().__init__("no registered model of that name")


class InvalidModelName(ValueError):
    """A name `register` cannot take."""


class ModelExists(ValueError):
    pass


class WrongModelKind(ValueError):
    """A registered model of the other kind (an embedder where a reranker is wanted, or the reverse)."""


def is_model_name(name: object) -> bool:
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def name_refusal(name: object) -> str | None:
    """Why `register` cannot take `name`, None when it can: the one wording of `vela models add` and of the flags
    that register a model after training (`--register`, `vela adapt --out`). A built-in name fits the rule: it is
    taken."""
    if isinstance(name, str) and name in BUILTIN_NAMES:
        return f"{name!r} is the built-in model's name: choose another"
    if not is_model_name(name):
        return f"model names are 1-64 letters, digits, '-', '_' or '.', not starting with '.'; got {name!r}"
    return None
