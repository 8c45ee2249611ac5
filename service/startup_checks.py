"""What `vela serve` checks before any API process starts, so that a configuration error is one line and exit
status 2 rather than processes that fail to start and are started again, or a server that answers 500 later."""

from __future__ import annotations

import os
from pathlib import Path

from indexing.settings import settings_error
from models import EmbedderCache
from models.embedder.onnx_embedder import DOCUMENT_PRECISION_ENV, DOCUMENT_PRECISIONS
from models.reranker.loading import resolve_reranker_dir
from service.settings import Settings

__all__ = ["settings_error", "startup_problem"]


def startup_problem(settings: Settings) -> str | None:
    """Why the API processes could not start with these settings (the models they load, the folders they write),
    or None."""
    try:
        EmbedderCache().resolve(settings.embedder)
        if settings.reranker:
            resolve_reranker_dir(settings.reranker)
    except (OSError, ValueError) as exc:
        return f"VELA_{'RERANKER' if 'reranker' in str(exc) else 'EMBEDDER'}: {exc}"
    precision = (os.environ.get(DOCUMENT_PRECISION_ENV) or "auto").strip().lower()
    if precision not in DOCUMENT_PRECISIONS:
        return f"{DOCUMENT_PRECISION_ENV} must be one of {', '.join(DOCUMENT_PRECISIONS)}, not {precision!r}"
    folders = (
        ("VELA_DATA_DIR", settings.data_dir),
        ("VELA_SNAPSHOTS_DIR", settings.snapshots_dir),
        ("VELA_MODELS_DIR", settings.models_dir),
    )
    for name, folder in folders:
        if folder is not None and _not_a_folder(Path(folder).expanduser()):
            return f"{name}: {folder} is not a folder this server can write to"
    return None


def _not_a_folder(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return True
    return not (path.is_dir() and os.access(path, os.W_OK | os.X_OK))
