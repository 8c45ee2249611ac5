"""The default embedder's fast CPU form: an ONNX export of the packaged MiniLM, made once and cached.

Queries run the int8 graph (the latency of a search); documents run the fp32 graph (model.documents.onnx), so
stored vectors equal torch fp32's within 1e-5 and only the query side carries quantization error: on
Cranfield the all-int8 form moved dense NDCG@10 by up to 0.008, more than the 0.005 Vela allows its encoders.

The packaged all-MiniLM-L6-v2 ships torch weights only. The first process that serves it on the CPU exports it
with `vela export-onnx`'s own code (dynamic int8, parity-checked against torch) into a cache directory; every
later process loads the cached export. Exporting here rather than shipping a prebuilt int8 file keeps one
source of weights (the packaged model) and one quantization recipe (models/onnx_export.py) for every embedder.

The cache key covers what changes the exported graph: the packaged model's files, the export recipe and the
onnx / onnxruntime / torch versions. A file lock makes concurrent first starts (API and worker) export once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

# Bump when models/onnx_export.py changes what it writes: old cached exports are then ignored.
EXPORT_RECIPE = 3
CACHE_ENV = "VELA_MODEL_CACHE"
READY = "vela_export.json"  # written last: a directory without it is an interrupted export


def cache_root() -> Path:
    """VELA_MODEL_CACHE, else $XDG_CACHE_HOME/vela/models, else ~/.cache/vela/models."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "vela" / "models"


def export_key(src: Path) -> str:
    """What the exported graph depends on: the source files (name, size, mtime), the recipe, the toolchain."""
    import onnx
    import onnxruntime
    import torch

    parts: list[object] = [EXPORT_RECIPE, onnx.__version__, onnxruntime.__version__, torch.__version__]
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        st = path.stat()
        parts.append((str(path.relative_to(src)), st.st_size, int(st.st_mtime)))
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def cached_int8_export(src: Path, *, name: str, root: Path | None = None) -> Path:
    """The int8 ONNX export of the torch embedder in `src`, exported on first use into `root` (cache_root())."""
    root = root if root is not None else cache_root()
    key = export_key(src)
    out = root / f"{name}-onnx-int8-{key}"
    if (out / READY).is_file():
        return out
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the export done
        if not (out / READY).is_file():
            from models.onnx_export import export  # torch.onnx and the quantizer: only when exporting

            export(str(src), str(out), quantize=True, fp32_documents=True)
            (out / READY).write_text(json.dumps({"source": str(src), "key": key, "recipe": EXPORT_RECIPE}))
    return out
