"""How an encoder turns text into one vector: pooling, prefixes, length, normalisation, and what runs it.

Saved beside the weights as `vela_embedder.json`. For a plain sentence-transformers directory (such as the
packaged all-MiniLM-L6-v2) the same facts are read from its own files, so nothing is hard-coded.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CONFIG_NAME = "vela_embedder.json"
POOLINGS = ("mean", "cls", "last")
# What runs the transformer: torch (training, GPU, bf16) or an exported ONNX graph (CPU, optionally int8).
BACKENDS = ("torch", "onnx")
SUBDIR_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")  # one plain name: never a path out of the model


@dataclass(frozen=True)
class EmbedderConfig:
    pooling: str = "mean"
    normalize: bool = True
    query_prefix: str = ""
    document_prefix: str = ""
    max_length: int = 256
    # Matryoshka prefix dims the model was trained for (empty: not trained for it; truncation still works).
    matryoshka_dims: tuple[int, ...] = field(default_factory=tuple)
    # Configs written before this field existed have no `backend` key and load as torch.
    backend: str = "torch"
    # A subdirectory holding a second encoder for queries (an asymmetric model: `vela adapt` trains the query
    # side alone, so documents keep the vectors the base model gave them). Empty: one encoder for both sides.
    query_encoder: str = ""

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if not 8 <= self.max_length <= 32768:
            raise ValueError(f"max_length must be in [8, 32768], got {self.max_length}")
        if any(d <= 0 for d in self.matryoshka_dims):
            raise ValueError(f"matryoshka_dims must be positive, got {self.matryoshka_dims}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.query_encoder and not SUBDIR_RE.fullmatch(self.query_encoder):
            raise ValueError(f"query_encoder must name a subdirectory of the model, got {self.query_encoder!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["matryoshka_dims"] = list(self.matryoshka_dims)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EmbedderConfig:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"unknown embedder config keys: {unknown}")
        if "matryoshka_dims" in known:
            known["matryoshka_dims"] = tuple(known["matryoshka_dims"])
        return cls(**known)

    def save(self, model_dir: str | os.PathLike[str]) -> None:
        path = Path(model_dir) / CONFIG_NAME
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2))
        os.replace(tmp, path)

    @classmethod
    def from_dir(cls, model_dir: str | os.PathLike[str]) -> EmbedderConfig:
        """Read `vela_embedder.json`, else the sentence-transformers files, else defaults."""
        root = Path(model_dir)
        own = root / CONFIG_NAME
        if own.exists():
            return cls.from_dict(json.loads(own.read_text()))
        kwargs: dict[str, Any] = {}
        pooling_file = root / "1_Pooling" / "config.json"
        if pooling_file.exists():
            p = json.loads(pooling_file.read_text())
            if p.get("pooling_mode_cls_token"):
                kwargs["pooling"] = "cls"
            elif p.get("pooling_mode_lasttoken"):
                kwargs["pooling"] = "last"
            else:
                kwargs["pooling"] = "mean"
        st_file = root / "sentence_bert_config.json"
        if st_file.exists():
            kwargs["max_length"] = int(json.loads(st_file.read_text()).get("max_seq_length", 256))
        prompts_file = root / "config_sentence_transformers.json"
        if prompts_file.exists():
            prompts = json.loads(prompts_file.read_text()).get("prompts") or {}
            kwargs["query_prefix"] = prompts.get("query", "")
            kwargs["document_prefix"] = prompts.get("document", prompts.get("passage", ""))
        # Vela searches by inner product over unit vectors (cosine), so normalisation stays on unless a
        # model's own vela_embedder.json turns it off.
        return cls(**kwargs)
