"""Arguments of `vela train reranker`: model, data, and HF TrainingArguments with RankMamba's defaults.

Defaults follow RankMamba Table 2 / §3.5 for ~110M backbones: AdamW (betas 0.9/0.999, eps 1e-8, weight
decay 0.01), lr 2e-5, linear warm-up over 1000 steps then linear decay to 0, one epoch, 512 tokens, bf16
on CUDA. LoRA needs a larger lr (the paper uses 1e-4 for its LoRA runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import TrainingArguments

from models.reranker.configuration_reranker import DEFAULT_POOLING, FAMILIES, POOLINGS, check_settings, infer_family

PRECISIONS = ("auto", "fp32", "bf16")


@dataclass
class ModelArguments:
    backbone: str = field(
        default="default", metadata={"help": "'default' (packaged all-MiniLM-L6-v2) or a local HF model directory"}
    )
    family: str = field(default="auto", metadata={"help": f"auto (from the backbone's model_type) or {FAMILIES}"})
    pooling: str | None = field(default=None, metadata={"help": f"{POOLINGS}; unset: cls for encoders, else eos"})
    max_length: int = field(default=512, metadata={"help": "tokens per (query, document) input (FirstP)"})
    head_dropout: float = field(default=0.0, metadata={"help": "dropout before the linear head"})
    lora: bool = field(default=False, metadata={"help": "train LoRA adapters (merged into the saved model)"})
    lora_r: int = field(default=8, metadata={"help": "LoRA rank"})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA scaling numerator"})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout"})
    lora_target_modules: str = field(
        default="all-linear",
        metadata={"help": "'all-linear' or comma-separated module names (the head is trained fully)"},
    )

    def __post_init__(self) -> None:
        if self.family not in ("auto", *FAMILIES):
            raise ValueError(f"family must be auto or one of {FAMILIES}, got {self.family!r}")
        if self.pooling is not None and self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.lora_r < 1:
            raise ValueError(f"lora_r must be >= 1, got {self.lora_r}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        from models import resolve_model_dir
        from training.arg_checks import check_model_dir, fit_max_length, model_config

        check_model_dir("--backbone", self.backbone)
        # The reranker config's own checks, on the backbone's config.json: the config would refuse them only
        # once the backbone has loaded.
        config = model_config(resolve_model_dir(self.backbone))
        family = self.family if self.family != "auto" else infer_family(config)
        pooling = self.pooling or DEFAULT_POOLING.get(family, "cls")
        check_settings(family=family, pooling=pooling, max_length=self.max_length, head_dropout=self.head_dropout)
        fit_max_length(self, "max_length", config, model_flag="--backbone")


@dataclass
class DataArguments:
    data: str = field(default="", metadata={"help": "BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv"})
    split: str = field(default="train", metadata={"help": "qrels split to train on"})
    negatives: int = field(default=7, metadata={"help": "BM25 negatives per positive (group = 1 + negatives)"})
    bm25_depth: int = field(default=100, metadata={"help": "negatives are sampled from this BM25 top-k"})
    samples_per_qrel: int = field(default=1, metadata={"help": "groups per (query, positive); RankMamba uses 2"})
    max_queries: int | None = field(default=None, metadata={"help": "train on the first N queries only (smoke runs)"})
    data_seed_offset: int = field(default=0, metadata={"help": "added to --seed for negative sampling"})
    dev_queries: int = field(
        default=0,
        metadata={
            "help": "hold out N queries (a seeded draw) from training; their ids are written to OUT/dev_queries.txt "
            "for `vela eval --query-ids` (choosing rerank options without looking at the test split)"
        },
    )

    def __post_init__(self) -> None:
        if not self.data:
            raise ValueError("--data is required: a BEIR folder with corpus.jsonl, queries.jsonl, qrels/")
        from pathlib import Path

        # Read only after the backbone has loaded: a missing file must stop the run here.
        root = Path(self.data).expanduser()
        for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{self.split}.tsv"):
            if not (root / name).is_file():
                what = f"the --split {self.split!r}" if name.startswith("qrels/") else "a BEIR folder"
                raise ValueError(f"--data {self.data!r} has no {name} ({what} needs it)")
        if self.negatives < 1 or self.bm25_depth < self.negatives:
            raise ValueError(f"need 1 <= negatives <= bm25_depth, got {self.negatives}, {self.bm25_depth}")
        if self.dev_queries < 0:
            raise ValueError(f"dev_queries must be >= 0, got {self.dev_queries}")
        if self.samples_per_qrel < 1:
            raise ValueError(f"samples_per_qrel must be >= 1, got {self.samples_per_qrel}")


@dataclass
class RerankerTrainingArguments(TrainingArguments):
    """TrainingArguments with the paper's defaults; `per_device_train_batch_size` counts queries (groups)."""

    learning_rate: float = field(default=2e-5, metadata={"help": "peak AdamW learning rate"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    warmup_steps: float = field(default=1000, metadata={"help": "linear warm-up steps (a float < 1: a ratio)"})
    lr_scheduler_type: str = field(default="linear", metadata={"help": "linear decay to 0 after warm-up"})
    num_train_epochs: float = field(default=1.0, metadata={"help": "epochs (the paper trains one)"})
    per_device_train_batch_size: int = field(default=8, metadata={"help": "queries per step (each 1 + negatives docs)"})
    logging_steps: float = field(default=10, metadata={"help": "log every N steps"})
    report_to: None | str | list[str] = field(default="none", metadata={"help": "integrations to report to"})
    remove_unused_columns: bool = field(default=False, metadata={"help": "keep every collated tensor"})
    precision: str = field(default="auto", metadata={"help": f"{PRECISIONS}: auto is bf16 on CUDA, fp32 on CPU"})

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.precision == "auto":
            self.bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported() and not self.use_cpu
        elif self.precision == "bf16":
            self.bf16 = True
            if not torch.cuda.is_available():
                self.use_cpu = True  # HF refuses bf16 without a GPU unless told to run on CPU (autocast; AMX)
        super().__post_init__()


__all__ = ["DataArguments", "ModelArguments", "RerankerTrainingArguments"]
