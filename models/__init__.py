"""Shared model package: embedder architectures, their configs, and loading.

Imported by training, indexing and service; imports no other project package.
"""

import models._onnxruntime_env  # noqa: F401  (first: no ONNX Runtime telemetry, read when onnxruntime loads)
import models._openmp  # noqa: F401  (first: OpenMP settings before torch loads its runtime)
from models.embedder.configuration_embedder import EmbedderConfig
from models.embedder.modeling_embedder import Embedder
from models.loading import EmbedderCache, load_embedder, resolve_model_dir

__all__ = ["Embedder", "EmbedderCache", "EmbedderConfig", "load_embedder", "resolve_model_dir"]
