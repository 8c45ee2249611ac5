"""A bi-encoder over any Hugging Face encoder: tokenise, forward, pool, normalise.

`Embedder` runs the transformer in torch. The forward pass is one hook, `_last_hidden_state`, so other
backends (`OnnxEmbedder`) reuse the tokenisation, batching, pooling and normalisation here unchanged.
This base class knows none of its subclasses: which class reads a directory is decided by the loader table
in `models.loading` (`load_embedder`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import overload

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models.context import CorpusContext
from models.embedder.configuration_embedder import EmbedderConfig

PRECISIONS = ("fp32", "bf16")


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, config: EmbedderConfig) -> torch.Tensor:
    """One vector per text from the token states, as the config says (pooling, then normalisation)."""
    hidden = hidden.float()  # (B, L, d)
    attention_mask = attention_mask.to(hidden.device)  # (B, L)
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, L, 1)
    if config.pooling == "mean":
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # (B, d)
    elif config.pooling == "cls":
        pooled = hidden[:, 0]  # (B, d)
    else:
        # Last non-padding token; right padding assumed (the tokenizer default for encoders).
        last = attention_mask.sum(1) - 1  # (B,)
        pooled = hidden[torch.arange(hidden.size(0), device=hidden.device), last]  # (B, d)
    if config.normalize:
        pooled = torch.nn.functional.normalize(pooled, dim=-1)
    return pooled


@overload
def truncate_embeddings(vectors: torch.Tensor, dim: int) -> torch.Tensor: ...
@overload
def truncate_embeddings(vectors: np.ndarray, dim: int) -> np.ndarray: ...
def truncate_embeddings(vectors: torch.Tensor | np.ndarray, dim: int) -> torch.Tensor | np.ndarray:
    """Matryoshka: the first `dim` coordinates of each row (..., d), re-normalised to unit length. The
    Matryoshka loss trains exactly this (tensors) and the serving core's prefix index is built and queried
    with it (float32 arrays), so the two cannot drift apart."""
    if not 0 < dim <= vectors.shape[-1]:
        raise ValueError(f"cannot truncate {vectors.shape[-1]}-d embeddings to {dim}")
    if isinstance(vectors, torch.Tensor):
        return torch.nn.functional.normalize(vectors[..., :dim], dim=-1)
    prefix = vectors[..., :dim].astype(np.float32)  # (..., dim)
    norms = np.linalg.norm(prefix, axis=-1, keepdims=True)  # (..., 1)
    return prefix / np.maximum(norms, 1e-12)  # the same clamp as F.normalize


class Embedder:
    """Encodes queries and documents into float32 vectors (unit length when the config says so).

    `from_dir` reads a directory with the torch backend; `models.load_embedder` picks the class a directory
    needs (this one, `OnnxEmbedder`, `CdeEmbedder`) from the loader table in `models.loading`.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        config: EmbedderConfig,
        *,
        name: str,
        device: str = "cpu",
        precision: str = "fp32",
        query_model: PreTrainedModel | None = None,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.model = model.eval().to(device)
        self._setup(
            tokenizer,
            config,
            dim=int(model.config.hidden_size),
            max_positions=getattr(model.config, "max_position_embeddings", None),
            name=name,
            device=device,
            precision=precision,
        )
        # An asymmetric model's query encoder (config.query_encoder); None: `model` encodes both sides.
        self.query_model = query_model.eval().to(device) if query_model is not None else None

    def _setup(
        self,
        tokenizer: PreTrainedTokenizerBase,
        config: EmbedderConfig,
        *,
        dim: int,
        max_positions: int | None,
        name: str,
        device: str,
        precision: str,
    ) -> None:
        """State every backend shares; each backend's __init__ calls it."""
        self.tokenizer = tokenizer
        self.config = config
        self.name = name
        self.device = device
        self.precision = precision
        self.dim = dim
        self._max_positions = int(max_positions) if max_positions else config.max_length
        # The tokenizers library is not safe to call from several threads at once on one object.
        self._tok_lock = threading.Lock()
        # Only the torch backend reads an asymmetric model's query encoder (models/loading.py refuses it elsewhere).
        self.query_model = None

    @classmethod
    def from_dir(cls, model_dir: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32") -> Embedder:
        root = Path(model_dir)
        config = EmbedderConfig.from_dir(root)
        tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        model = AutoModel.from_pretrained(root, local_files_only=True)
        query_model = None
        if config.query_encoder:
            query_model = AutoModel.from_pretrained(root / config.query_encoder, local_files_only=True)
            if query_model.config.hidden_size != model.config.hidden_size:
                raise ValueError(f"{root}: the query encoder's width differs from the document encoder's")
        return cls(
            model, tokenizer, config, name=str(root), device=device, precision=precision, query_model=query_model
        )

    @property
    def max_tokens(self) -> int:
        """Longest input the model reads, in tokens (special tokens included)."""
        return min(self.config.max_length, self._max_positions)

    # A contextual embedder (CDE) encodes with a collection's corpus context; this one reads no context.
    contextual = False
    query_model: PreTrainedModel | None  # an asymmetric model's query encoder; None: one encoder for both sides

    def encode_queries(
        self, texts: Sequence[str], *, batch_size: int = 64, context: CorpusContext | None = None
    ) -> np.ndarray:
        self._refuse_context(context)
        texts = [self.config.query_prefix + t for t in texts]
        if self.query_model is not None:
            return self._encode(texts, batch_size, lambda b: self._forward(b, self.query_model))
        return self._encode(texts, batch_size)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, context: CorpusContext | None = None
    ) -> np.ndarray:
        self._refuse_context(context)
        return self._encode([self.config.document_prefix + t for t in texts], batch_size)

    def _refuse_context(self, context: CorpusContext | None) -> None:
        if context is not None:
            raise ValueError(f"embedder {self.name} is not contextual: it takes no corpus context")

    def _encode(
        self, texts: list[str], batch_size: int, forward: Callable[[list[str]], np.ndarray] | None = None
    ) -> np.ndarray:
        forward = forward or self._forward
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # Longest first, so each batch pads to similar lengths and memory peaks early.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = forward([texts[i] for i in idx])
        return out

    @torch.inference_mode()
    def _forward(self, texts: list[str], model: PreTrainedModel | None = None) -> np.ndarray:
        with self._tok_lock:
            batch = self.tokenizer(
                texts, padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt"
            )
        hidden = self._last_hidden_state(batch, model)  # (B, L, d)
        return pool(hidden, batch["attention_mask"], self.config).cpu().numpy()  # (B, d)

    def _last_hidden_state(
        self, batch: Mapping[str, torch.Tensor], model: PreTrainedModel | None = None
    ) -> torch.Tensor:
        """The backend hook: token states (B, L, d) for a tokenised batch (CPU tensors), by `model` (the query
        encoder of an asymmetric model) or the document encoder."""
        inputs = {k: v.to(self.device) for k, v in batch.items()}
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        with torch.autocast(self.device.split(":")[0], dtype=dtype, enabled=self.precision == "bf16"):
            return (model or self.model)(**inputs).last_hidden_state  # (B, L, d)
