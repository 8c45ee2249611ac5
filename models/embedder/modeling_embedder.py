"""A bi-encoder over any Hugging Face encoder: tokenise, forward, pool, normalise."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from models.embedder.configuration_embedder import EmbedderConfig

PRECISIONS = ("fp32", "bf16")


class Embedder:
    """Encodes queries and documents into float32 vectors (unit length when the config says so)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        config: EmbedderConfig,
        *,
        name: str,
        device: str = "cpu",
        precision: str = "fp32",
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.model = model.eval().to(device)
        self.tokenizer = tokenizer
        self.config = config
        self.name = name
        self.device = device
        self.precision = precision
        self.dim = int(model.config.hidden_size)
        # The tokenizers library is not safe to call from several threads at once on one object.
        self._tok_lock = threading.Lock()

    @classmethod
    def from_dir(cls, model_dir: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32") -> Embedder:
        root = Path(model_dir)
        config = EmbedderConfig.from_dir(root)
        tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        model = AutoModel.from_pretrained(root, local_files_only=True)
        return cls(model, tokenizer, config, name=str(root), device=device, precision=precision)

    @property
    def max_tokens(self) -> int:
        """Longest input the model reads, in tokens (special tokens included)."""
        limit = getattr(self.model.config, "max_position_embeddings", self.config.max_length)
        return min(self.config.max_length, int(limit))

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        return self._encode([self.config.query_prefix + t for t in texts], batch_size)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        return self._encode([self.config.document_prefix + t for t in texts], batch_size)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # Longest first, so each batch pads to similar lengths and memory peaks early.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._forward([texts[i] for i in idx])
        return out

    @torch.inference_mode()
    def _forward(self, texts: list[str]) -> np.ndarray:
        with self._tok_lock:
            batch = self.tokenizer(
                texts, padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt"
            )
        batch = {k: v.to(self.device) for k, v in batch.items()}
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        with torch.autocast(self.device.split(":")[0], dtype=dtype, enabled=self.precision == "bf16"):
            hidden = self.model(**batch).last_hidden_state  # (B, L, d)
        hidden = hidden.float()
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, L, 1)
        if self.config.pooling == "mean":
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # (B, d)
        elif self.config.pooling == "cls":
            pooled = hidden[:, 0]  # (B, d)
        else:
            # Last non-padding token; right padding assumed (the tokenizer default for encoders).
            last = batch["attention_mask"].sum(1) - 1  # (B,)
            pooled = hidden[torch.arange(hidden.size(0)), last]  # (B, d)
        if self.config.normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        return pooled.cpu().numpy()
