"""Reranker directories at inference: check, load once per process, score pairs from any thread."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from models.device import resolve_device, resolve_precision
from models.reranker.configuration_reranker import MODEL_TYPE
from models.reranker.modeling_reranker import RerankerModel
from models.reranker.processing_reranker import RerankerProcessor

PRECISIONS = ("fp32", "bf16")


class NotARerankerError(ValueError):
    """The directory holds a model, but not a Vela reranker (another model_type)."""


def resolve_reranker_dir(name: str | os.PathLike[str]) -> Path:
    """The directory of a reranker; FileNotFoundError if there is none, NotARerankerError if it is not one."""
    path = Path(name).expanduser()
    config_file = path / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"reranker {str(name)!r} is not a local model directory (no config.json there)")
    try:
        model_type = json.loads(config_file.read_text()).get("model_type")
    except (OSError, ValueError) as exc:
        raise NotARerankerError(f"reranker {str(name)!r}: unreadable config.json ({exc})") from exc
    if model_type != MODEL_TYPE:
        raise NotARerankerError(
            f"{str(name)!r} is a {model_type!r} model, not a reranker (model_type {MODEL_TYPE!r}): "
            "train one with `vela train reranker`"
        )
    return path.resolve()


class CrossEncoder:
    """A loaded reranker: tokenizer + model + the lock that makes `score` safe from many threads.

    One forward pass runs at a time: on a CPU two concurrent passes only fight over the same cores.
    """

    def __init__(
        self, model: RerankerModel, processor: RerankerProcessor, *, name: str, device: str, precision: str
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.model = model.eval().to(device)
        self.processor = processor
        self.name = name
        self.device = device
        self.precision = precision
        self._lock = threading.Lock()
        # Seconds per scored pair, smoothed over recent calls: what a time budget predicts the next batch from.
        self.seconds_per_pair: float | None = None

    @classmethod
    def from_dir(
        cls, model_dir: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32"
    ) -> CrossEncoder:
        root = resolve_reranker_dir(model_dir)
        model = AutoModel.from_pretrained(root, local_files_only=True)
        if not isinstance(model, RerankerModel):
            raise NotARerankerError(f"{root} loaded as {type(model).__name__}, not a reranker")
        tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        return cls(
            model, RerankerProcessor(tokenizer, model.config), name=str(root), device=device, precision=precision
        )

    @property
    def max_length(self) -> int:
        return self.processor.max_length

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """Scores of (query, d) for each document, in one forward pass (callers choose the batch). (n,)"""
        if not documents:
            return np.empty(0, dtype=np.float32)
        with self._lock:
            t0 = time.perf_counter()  # compute only: time spent waiting for the lock is not the model's cost
            scores = self._forward([query] * len(documents), list(documents))
            per_pair = (time.perf_counter() - t0) / len(documents)
            prev = self.seconds_per_pair
            self.seconds_per_pair = per_pair if prev is None else 0.7 * prev + 0.3 * per_pair
        return scores

    @torch.inference_mode()
    def _forward(self, queries: list[str], documents: list[str]) -> np.ndarray:
        batch = self.processor(queries, documents)
        inputs = {k: v.to(self.device) for k, v in batch.items()}  # (B, L) each
        bf16 = self.precision == "bf16"
        with torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16, enabled=bf16):
            logits = self.model(**inputs).logits  # (B,)
        return logits.float().cpu().numpy()  # type: ignore[no-any-return]


def load_reranker(model_dir: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32") -> CrossEncoder:
    """One call from a `vela train reranker` output directory to something that scores pairs."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return CrossEncoder.from_dir(model_dir, device=device, precision=precision)


class RerankerCache:
    """Loads each reranker once per process and shares it between requests (thread-safe)."""

    def __init__(self, *, device: str = "cpu", precision: str = "fp32") -> None:
        self.device = resolve_device(device)  # a resolved setting stays as it is
        self.precision = resolve_precision(precision, self.device)
        self._loaded: dict[Path, CrossEncoder] = {}
        self._paths: dict[str, Path] = {}  # a name resolved (directory checked, config read) once per process
        self._lock = threading.Lock()

    def resolve(self, name: str | os.PathLike[str]) -> Path:
        key = os.fspath(name)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = resolve_reranker_dir(name)
        return path

    def get(self, name: str | os.PathLike[str]) -> CrossEncoder:
        path = self.resolve(name)
        with self._lock:  # two first requests for one model load it once, not twice
            if path not in self._loaded:
                self._loaded[path] = load_reranker(path, device=self.device, precision=self.precision)
            return self._loaded[path]

    def loaded(self) -> list[str]:
        with self._lock:
            return [str(p) for p in self._loaded]


__all__ = ["CrossEncoder", "NotARerankerError", "RerankerCache", "load_reranker", "resolve_reranker_dir"]
