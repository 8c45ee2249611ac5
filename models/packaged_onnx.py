"""The default embedder's fast CPU form: an ONNX export of the packaged MiniLM, made once and cached.

Queries and documents run one int8 graph quantized per token (model.onnx, and the same graph as
model.documents.onnx, with a session of its own: `onnx_quantize.quantize_per_token`): every weight MatMul in
int8, each token with its own activation range, so a text's vector does not depend on the batch it was encoded
in (with dynamic int8, whose activation range is the whole batch's, a query's top 10 changed with the queries
that shared its encoder pass) and stays within cosine 0.998 of torch fp32 (dynamic int8 for documents moved
Cranfield dense NDCG@10 by 0.008, more than the 0.005 Vela allows its encoders). The fp32 document graph stays
beside it (model.documents.fp32.onnx): VELA_DOCUMENT_PRECISION=fp32 embeds documents as torch fp32 does, within
1e-5.

The packaged all-MiniLM-L6-v2 ships torch weights only. The first process that serves it on the CPU exports it
with `vela export-onnx`'s own code (dynamic int8, parity-checked against torch) into a cache directory; every
later process loads the cached export. Exporting here rather than shipping a prebuilt int8 file keeps one
source of weights (the packaged model) and one quantization recipe (models/onnx_export.py) for every embedder.

The same cache holds the ONNX form of an adapted (asymmetric) model, made the same way on first load
(models/loading.py `asymmetric_onnx_dir`): its query encoder and its base become the two graphs.

The cache key covers what changes the exported graph: the packaged model's files, the export recipe, the
onnx / onnxruntime / torch versions and whether the CPU has VNNI (7-bit document weights without it). A file
lock makes concurrent first starts (API and worker) export once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

from models.device import cpu_has_vnni

# Bump when models/onnx_export.py changes what it writes: old cached exports are then ignored.
EXPORT_RECIPE = 6
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
    parts.append(cpu_has_vnni())
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

            export(str(src), str(out), quantize=True, token_int8_documents=True, token_int8_queries=True)
            (out / READY).write_text(json.dumps({"source": str(src), "key": key, "recipe": EXPORT_RECIPE}))
    return out
