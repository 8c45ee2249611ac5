"""Whether a name can be a collection's embedder, told before any collection is made.

A reranker's folder holds a BERT-like config and weights: it would load as an encoder and fail only inside the
ingest job, leaving behind a collection whose embedder is a reranker. `--rerank` refuses an embedder's folder
(models.reranker.resolve_reranker_dir); this is its counterpart for `--embedder`."""

from __future__ import annotations


def embedder_problem(name: str) -> str | None:
    """Why `name` (a built-in name or a model directory) is not an embedder, or None."""
    from models.loading import DEFAULT_ALIASES, ONNX_ALIASES
    from models.model_dirs import resolve_torch_dir
    from models.registry import RERANKER_MODEL_TYPE, InvalidModelDir, kind_of, read_config

    try:  # the directory a collection would record (EmbedderCache.resolve's)
        root = resolve_torch_dir(DEFAULT_ALIASES[0] if name in ONNX_ALIASES else name)
        kind = kind_of(read_config(root))
    except (OSError, InvalidModelDir) as e:
        return f"{name!r}: {e}" if isinstance(e, InvalidModelDir) else str(e)
    if kind != "embedder":
        return f"{name!r} is a {kind} (model_type {RERANKER_MODEL_TYPE!r}), not an embedder"
    return None
