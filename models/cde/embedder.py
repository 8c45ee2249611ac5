"""Inference for a CDE model directory: the same interface as `Embedder`, plus the corpus context.

`embed_context_documents` runs the first stage (the indexing worker calls it once per collection); `encode_*`
run the second stage with a `CorpusContext` (or none: the model then works as a plain bi-encoder).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedTokenizerBase

from models.cde.modeling_cde import CdeModel
from models.context import CorpusContext
from models.embedder.configuration_embedder import EmbedderConfig
from models.embedder.modeling_embedder import PRECISIONS, Embedder


def weights_fingerprint(model_dir: Path) -> str:
    """Content hash of the weights: a context made by other weights must not be reused."""
    h = hashlib.sha256()
    for f in sorted(model_dir.glob("*.safetensors")):
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


class CdeEmbedder(Embedder):
    contextual = True

    def __init__(
        self,
        model: CdeModel,
        tokenizer: PreTrainedTokenizerBase,
        config: EmbedderConfig,
        *,
        name: str,
        fingerprint: str,
        device: str = "cpu",
        precision: str = "fp32",
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.model = model.eval().to(device)
        second = model.config.second_stage
        self._setup(
            tokenizer,
            config,
            dim=int(second.hidden_size),
            max_positions=getattr(second, "max_position_embeddings", None),
            name=name,
            device=device,
            precision=precision,
        )
        self.fingerprint = fingerprint
        self.corpus_context_size = int(model.config.corpus_context_size)

    @classmethod
    def from_dir(  # type: ignore[override]
        cls, model_dir: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32"
    ) -> CdeEmbedder:
        root = Path(model_dir)
        model = AutoModel.from_pretrained(root, local_files_only=True)
        if not isinstance(model, CdeModel):
            raise ValueError(f"{root} is not a CDE model directory")
        tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        return cls(
            model,
            tokenizer,
            EmbedderConfig.from_dir(root),
            name=str(root),
            fingerprint=weights_fingerprint(root),
            device=device,
            precision=precision,
        )

    def embed_context_documents(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """M1 over context documents (document prefix applied): (J, d1) unit vectors."""
        docs = [self.config.document_prefix + t for t in texts]
        out = []
        for start in range(0, len(docs), batch_size):
            with self._tok_lock:
                batch = self.tokenizer(
                    docs[start : start + batch_size],
                    padding=True,
                    truncation=True,
                    max_length=self.max_tokens,
                    return_tensors="pt",
                )
            with torch.inference_mode():
                vecs = self.model.embed_context(
                    batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device)
                )
            out.append(vecs.float().cpu().numpy())  # (b, d1)
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)

    def make_context(
        self, doc_ids: Sequence[str], texts: Sequence[str], *, corpus_documents: int, seed: int
    ) -> CorpusContext:
        return CorpusContext(
            vectors=self.embed_context_documents(texts),
            doc_ids=tuple(doc_ids),
            fingerprint=self.fingerprint,
            corpus_documents=corpus_documents,
            seed=seed,
        )

    def _check(self, context: CorpusContext | None) -> CorpusContext | None:
        if context is not None and context.fingerprint != self.fingerprint:
            raise ValueError(
                f"corpus context {context.id} was made by other weights ({context.fingerprint}); "
                f"this model is {self.fingerprint}: rebuild the context"
            )
        return context

    def encode_queries(
        self, texts: Sequence[str], *, batch_size: int = 64, context: CorpusContext | None = None
    ) -> np.ndarray:
        ctx = self._check(context)
        return self._encode_with([self.config.query_prefix + t for t in texts], batch_size, ctx)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, context: CorpusContext | None = None
    ) -> np.ndarray:
        ctx = self._check(context)
        return self._encode_with([self.config.document_prefix + t for t in texts], batch_size, ctx)

    def _encode_with(self, texts: list[str], batch_size: int, context: CorpusContext | None) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        ctx = None if context is None else torch.from_numpy(np.asarray(context.vectors, np.float32)).to(self.device)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            with self._tok_lock:
                batch = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_tokens,
                    return_tensors="pt",
                )
            out[idx] = self._second_stage(batch, ctx)
        return out

    @torch.inference_mode()
    def _second_stage(self, batch: Mapping[str, torch.Tensor], context: torch.Tensor | None) -> np.ndarray:
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        with torch.autocast(self.device.split(":")[0], dtype=dtype, enabled=self.precision == "bf16"):
            vecs = self.model(
                input_ids=batch["input_ids"].to(self.device),
                attention_mask=batch["attention_mask"].to(self.device),
                context=context,
            )  # (B, d), unit rows
        return vecs.float().cpu().numpy()
