"""Finding model directories offline and loading each embedder once.

Which class reads a directory is decided here, by a table, in the way transformers' Auto classes map a
config's `model_type` to a class: Vela's own architectures are keyed by the `model_type` in config.json, any
other (stock Hugging Face) encoder by the backend its `vela_embedder.json` names. The classes themselves do
not know each other: the base `Embedder` never imports its subclasses, so the models package has no import
cycles, and an architecture's module is imported only when a directory of that architecture is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from models.device import resolve_device, resolve_precision
from models.embedder.configuration_embedder import EmbedderConfig
from models.embedder.modeling_embedder import Embedder
from models.model_dirs import DEFAULT_ALIASES, TORCH_ALIASES, _set_offline, packaged_minilm_dir, resolve_torch_dir

__all__ = [
    "DEFAULT_ALIASES",
    "TORCH_ALIASES",
    "EmbedderCache",
    "ModelLoadError",
    "_set_offline",
    "choose_encoder",
    "load_embedder",
    "packaged_minilm_dir",
    "packaged_onnx_dir",
    "resolve_model_dir",
]

# The packaged MiniLM in its ONNX form whatever VELA_ENCODER says: the cached int8 export.
ONNX_ALIASES = ("minilm-onnx",)
# VELA_ENCODER: what runs the packaged default. auto: ONNX Runtime int8 on a CPU in fp32, torch on a GPU or in bf16.
ENCODERS = ("auto", "onnx", "torch")
ENCODER_ENV = "VELA_ENCODER"


def packaged_onnx_dir() -> Path:
    """The int8 ONNX export of the packaged MiniLM, exported into the model cache on first use."""
    from models.packaged_onnx import cached_int8_export

    return cached_int8_export(packaged_minilm_dir(), name="all-MiniLM-L6-v2")


def onnx_servable(root: Path) -> bool:
    """An asymmetric model (`vela adapt`'s: a plain torch encoder with a query encoder of its own) adapted from the
    packaged default, which the ONNX form serves as it serves the default: the query side in int8, the documents'
    graph beside it. One adapted from another model keeps that model's form (torch): its document side is its
    base's, so a collection reindexed to it keeps its vectors (indexing/vector_reuse.py), which a document graph
    in another form than the base's would not give."""
    config = EmbedderConfig.from_dir(root)
    plain = bool(config.query_encoder) and config.backend == "torch" and model_type(root) not in ARCHITECTURES
    return plain and _base_model(root) in (None, "default")


def _base_model(root: Path) -> str | None:
    """The `base_model` that `vela adapt` recorded in the model's training_args.json (None where none is)."""
    try:
        base = json.loads((root / "training_args.json").read_text()).get("base_model")
    except (OSError, ValueError, AttributeError):
        return None
    return base if isinstance(base, str) else None


def asymmetric_onnx_dir(root: Path) -> Path:
    """The int8 ONNX export of an asymmetric model, made once per machine into the model cache (the recipe and the
    cache of the packaged default: per-token int8 for queries and documents, fp32 documents beside them)."""
    from models.packaged_onnx import cached_int8_export

    # The path in the name: two models whose files match in name, size and mtime (copies) still get an export each.
    return cached_int8_export(root, name=f"{root.name}-{hashlib.sha256(str(root).encode()).hexdigest()[:8]}")


def choose_encoder(encoder: str | None, *, device: str, precision: str) -> str:
    """`onnx` or `torch` for the packaged default: the setting (None: VELA_ENCODER), `auto` resolved.

    ONNX Runtime runs on the CPU in int8 only; a GPU or a bf16 precision asks for torch."""
    setting = (encoder or os.environ.get(ENCODER_ENV) or "auto").strip().lower()
    if setting not in ENCODERS:
        raise ValueError(f"{ENCODER_ENV} must be one of {ENCODERS}, got {setting!r}")
    if setting != "auto":
        return setting
    return "onnx" if device == "cpu" and precision == "fp32" else "torch"


def resolve_model_dir(name: str | os.PathLike[str], *, encoder: str = "torch") -> Path:
    """Map an embedder name (an alias of the packaged default, or a local directory) to a directory.

    `encoder` ("torch" or "onnx") picks the form of the packaged default; trainers keep the torch default."""
    if str(name) in ONNX_ALIASES or (str(name) in DEFAULT_ALIASES and encoder == "onnx"):
        return packaged_onnx_dir()
    return resolve_torch_dir(name)


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
    if config.query_encoder and loader is not _torch:
        raise ValueError(f"{root}: a separate query encoder is read by the torch backend of a plain encoder only")
    return loader(root, config, device, precision)


def load_embedder(
    name: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32", encoder: str = "torch"
) -> Embedder:
    """`encoder`: the form of the packaged default ("torch" or "onnx"; EmbedderCache resolves VELA_ENCODER)."""
    _set_offline()
    return embedder_from_dir(resolve_model_dir(name, encoder=encoder), device=device, precision=precision)


class ModelLoadError(ValueError):
    """A model folder whose files do not load (a damaged weights file, weights that do not fit the config)."""


class EmbedderCache:
    """Loads each embedder once per process and shares it between collections and requests.

    The packaged MiniLM has one identity, its package directory (what `resolve` returns for `default`,
    `minilm-torch` and `minilm-onnx`, and what a collection stores), and two forms: which one `get` loads is a
    serving choice, VELA_ENCODER's, or the one a name asks for. A collection made with torch fp32 vectors is
    then served by the ONNX form (its documents run the same fp32 weights), and no collection stores the path
    of a cached export, which a cleared cache or a new toolchain would take away. An asymmetric model (what
    `vela adapt` registers) has the same two forms, its ONNX one exported into the same cache on first use.
    """

    def __init__(self, *, device: str = "cpu", precision: str = "fp32", encoder: str | None = None) -> None:
        # Settings as given (auto, cuda, ...) or already resolved: resolving a resolved one changes nothing.
        self.device = resolve_device(device)
        self.precision = resolve_precision(precision, self.device)
        # What serves the packaged default (VELA_ENCODER when None): "onnx" or "torch".
        self.encoder = choose_encoder(encoder, device=self.device, precision=self.precision)
        self._loaded: dict[Path, Embedder] = {}
        self._paths: dict[str, Path] = {}  # a name resolved once per process, not once per request
        self._served: dict[str, Path] = {}  # a name -> the directory `get` loads for it (the packaged one's form)
        self._lock = threading.Lock()

    def resolve(self, name: str | os.PathLike[str]) -> Path:
        """The model's identity: a local directory, or the packaged MiniLM's directory for its names."""
        key = os.fspath(name)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = resolve_torch_dir(key if key not in ONNX_ALIASES else DEFAULT_ALIASES[0])
        return path

    def served_dir(self, name: str | os.PathLike[str]) -> Path:
        """The directory `get` loads: `resolve(name)`, or for the packaged MiniLM the form chosen for it."""
        key = os.fspath(name)
        served = self._served.get(key)
        if served is None:
            path = self.resolve(name)
            form = "torch" if key in TORCH_ALIASES else "onnx" if key in ONNX_ALIASES else self.encoder
            packaged = path == packaged_minilm_dir()
            if form == "onnx" and packaged:
                served = packaged_onnx_dir()
            elif form == "onnx" and onnx_servable(path):
                served = asymmetric_onnx_dir(path)
            else:
                served = path
            self._served[key] = served
        return served

    def get(self, name: str | os.PathLike[str]) -> Embedder:
        """The loaded embedder. A folder that does not load raises OSError, ValueError, or ModelLoadError (a
        ValueError) for what the libraries raise of their own (a damaged safetensors file, a config that does not
        fit its weights), so that callers tell a bad model from a fault of their own with one except clause."""
        path = self.served_dir(name)
        with self._lock:
            if path not in self._loaded:
                try:
                    self._loaded[path] = load_embedder(path, device=self.device, precision=self.precision)
                except (OSError, ValueError):
                    raise
                except Exception as exc:  # noqa: BLE001  what a damaged folder makes the loaders raise
                    raise ModelLoadError(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
            return self._loaded[path]

    def loaded(self) -> list[str]:
        return [str(p) for p in self._loaded]
