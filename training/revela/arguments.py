"""Arguments of `vela train revela` (and its REPLUG baseline); the training loop's are the HF `TrainingArguments`.

Defaults follow the paper (Sec. 4.1, App. A.3): chunks of <= 120 words, batches of 16, tau 1e-4, eps 1e-6,
passages cut at 160 tokens, LoRA rank 256 on GPU, lr 1e-4 with 100 warm-up steps (REPLUG: lr 5e-4,
tau_r = eta = 1e-3).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from models.device import resolve_device

REVELA_TRAINING_DEFAULTS = {"learning_rate": 1e-4, "warmup_steps": 100, "logging_steps": 10}
REPLUG_TRAINING_DEFAULTS = {**REVELA_TRAINING_DEFAULTS, "learning_rate": 5e-4}
PAPER_LORA_RANK = 256
METHODS = ("revela", "replug")
DEFAULT_TEMPERATURE = {"revela": 1e-4, "replug": 1e-3}


def check_causal_lm(path: str, config: dict[str, Any]) -> None:
    """`--lm` is a causal LM (Llama, Qwen2, GPT-2, ...): an encoder (BERT) would load with an LM head, train,
    and fail only when saved (its tied weights), after all the work. BERT-style models are in transformers'
    causal-LM table too, so the masked-LM table tells them apart, as the reranker's family does."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    kind = config.get("model_type")
    if kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise ValueError(
            f"--lm {path!r} is a {kind or 'model of no model_type'}, not a causal LM (Llama, Qwen2 or GPT-2 family)"
        )


@dataclass
class RevelaArguments:
    method: str = field(default="revela", metadata={"help": "revela (in-batch attention) or replug (baseline)"})
    model: str = field(default="default", metadata={"help": "retriever: 'default' (packaged MiniLM) or a local dir"})
    lm: str = field(default="", metadata={"help": "local causal LM directory (Llama, Qwen2 or GPT-2 family)"})
    corpus: list[str] = field(
        default_factory=list,
        metadata={"help": "BEIR folders, JSONL files of {_id, title, text}, or ingested collections (repeatable)"},
    )
    text_kind: str = field(default="natural", metadata={"help": "natural (sentence units) or code (line units)"})
    chunk_words: int = field(default=120, metadata={"help": "most words per chunk (chunks are whole sentences)"})
    min_chunk_words: int = field(default=5, metadata={"help": "drop chunks shorter than this"})
    batch_size: int = field(default=16, metadata={"help": "chunks per batch (the in-batch documents B)"})
    interleave_docs: int = field(
        default=0, metadata={"help": "documents interleaved together (0: as many as fill one batch)"}
    )
    max_batches: int = field(default=0, metadata={"help": "train on a seeded sample of this many batches (0: all)"})
    max_docs: int = field(default=0, metadata={"help": "read at most this many documents per corpus (0: all)"})
    max_minutes: float | None = field(
        default=None, metadata={"help": "stop after this much training wall-clock time, > 0 (unset: no budget)"}
    )
    sim_text: str = field(
        default="", metadata={"help": "query side of Sim: half (first half of the chunk) or full; empty: by text_kind"}
    )
    temperature: float = field(default=0.0, metadata={"help": "retriever softmax temperature (0: 1e-4 / 1e-3)"})
    lm_temperature: float = field(default=1e-3, metadata={"help": "REPLUG: temperature of the LM's distribution"})
    v_norm_eps: float = field(default=1e-6, metadata={"help": "V-normalisation epsilon (<= 0: no V-normalisation)"})
    max_length: int = field(default=160, metadata={"help": "retriever tokens per chunk"})
    lm_max_length: int = field(default=160, metadata={"help": "LM tokens per chunk"})
    lora_r: int = field(default=-1, metadata={"help": "retriever LoRA rank (0: full; -1: 256 on GPU, else full)"})
    lora_alpha: int = field(default=0, metadata={"help": "retriever LoRA alpha (0: twice the rank)"})
    lm_lora_r: int = field(default=-1, metadata={"help": "LM LoRA rank (0: full; -1: 256 on GPU, else full)"})
    lm_lora_alpha: int = field(default=0, metadata={"help": "LM LoRA alpha (0: twice the rank)"})
    replug_pairs_per_pass: int = field(default=64, metadata={"help": "REPLUG: (context, target) pairs per LM pass"})
    query_prefix: str | None = field(default=None, metadata={"help": "retriever query prefix (unset: its config's)"})
    document_prefix: str | None = field(default=None, metadata={"help": "passage prefix (unset: its config's)"})
    pooling: str = field(default="", metadata={"help": "retriever pooling (empty: its config's)"})
    save_lm: bool = field(default=False, metadata={"help": "also save the trained LM (LoRA merged) under OUT/lm"})

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not self.lm or not self.corpus:
            raise ValueError("--lm (a local causal LM dir) and --corpus (repeatable) are required")
        from models import resolve_model_dir
        from training.arg_checks import check_local_model_dir, check_model_dir, fit_max_length, model_config

        check_local_model_dir("--lm", self.lm)
        check_model_dir("--model", self.model)
        lm_config = model_config(self.lm)
        check_causal_lm(self.lm, lm_config)
        fit_max_length(self, "max_length", model_config(resolve_model_dir(self.model)), model_flag="--model")
        fit_max_length(self, "lm_max_length", lm_config, model_flag="--lm")
        if self.text_kind not in ("natural", "code"):
            raise ValueError("text_kind must be natural or code")
        self.sim_text = self.sim_text or ("half" if self.text_kind == "natural" else "full")
        if self.sim_text not in ("half", "full"):
            raise ValueError("sim_text must be half or full")
        if self.batch_size < 3:
            raise ValueError("batch_size must be >= 3: each chunk needs at least two others to weigh")
        if self.chunk_words < 2 or not 0 < self.min_chunk_words <= self.chunk_words:
            raise ValueError("need 0 < min_chunk_words <= chunk_words")
        if self.max_minutes is not None and not self.max_minutes > 0:  # as `vela adapt`: 0 is no budget to train in
            raise ValueError(f"max_minutes must be > 0 (leave it unset for no budget), got {self.max_minutes:g}")
        if self.pooling not in ("", "mean", "cls", "last"):
            raise ValueError("pooling must be mean, cls or last (empty: keep the retriever's)")
        self.temperature = self.temperature or DEFAULT_TEMPERATURE[self.method]
        if not (self.temperature > 0 and self.lm_temperature > 0):  # `not >`: NaN is refused too
            raise ValueError("temperatures must be > 0")
        gpu = resolve_device(os.environ.get("VELA_DEVICE", "auto")) != "cpu"  # where `vela train` trains
        # The paper's rank on GPU; on CPU a small encoder / LM trains in full (cheaper than rank-256 adapters).
        self.lora_r = (PAPER_LORA_RANK if gpu else 0) if self.lora_r < 0 else self.lora_r
        self.lm_lora_r = (PAPER_LORA_RANK if gpu else 0) if self.lm_lora_r < 0 else self.lm_lora_r
        self.lora_alpha = self.lora_alpha or 2 * self.lora_r
        self.lm_lora_alpha = self.lm_lora_alpha or 2 * self.lm_lora_r
