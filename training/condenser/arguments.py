"""Arguments of `vela train condenser`; the training loop's are the HF `TrainingArguments`."""

from __future__ import annotations

from dataclasses import dataclass, field

# The paper's pretraining settings (4.1): AdamW, lr 1e-4, linear schedule with 10% warm-up.
CONDENSER_TRAINING_DEFAULTS = {
    "learning_rate": 1e-4,
    "warmup_steps": 0.1,
    "per_device_train_batch_size": 32,
    "logging_steps": 10,
}


@dataclass
class CondenserArguments:
    model: str = field(default="default", metadata={"help": "'default' (packaged MiniLM) or a local BERT-family dir"})
    corpus: list[str] = field(
        default_factory=list, metadata={"help": "BEIR folders or JSONL files of {_id, title, text} (repeatable)"}
    )
    max_length: int = field(default=128, metadata={"help": "tokens per pretraining passage (texts are cut)"})
    min_tokens: int = field(default=16, metadata={"help": "drop passage tails shorter than this"})
    early_layers: int = field(default=0, metadata={"help": "backbone layers before the skip (0: half)"})
    head_layers: int = field(default=2, metadata={"help": "Condenser head layers (random init)"})
    backbone_mlm_weight: float = field(default=1.0, metadata={"help": "weight of the backbone-MLM constraint"})
    mlm_probability: float = field(default=0.15, metadata={"help": "masked fraction (BERT's 80/10/10 scheme)"})
    eval_fraction: float = field(default=0.02, metadata={"help": "held-out passages for the before/after MLM loss"})
    max_eval_passages: int = field(default=256, metadata={"help": "cap on held-out passages"})
    pooling: str = field(default="", metadata={"help": "pooling of the saved encoder (empty: the source model's)"})

    def __post_init__(self) -> None:
        if not self.corpus:
            raise ValueError("--corpus is required: a BEIR folder or JSONL file (repeatable)")
        if not 16 <= self.max_length <= 512 or not 0 < self.mlm_probability < 1:
            raise ValueError("max_length must be in [16, 512] and mlm_probability in (0, 1)")
        if not 0 < self.eval_fraction < 0.5:
            raise ValueError("eval_fraction must be in (0, 0.5)")
        if self.pooling not in ("", "mean", "cls", "last"):
            raise ValueError("pooling must be mean, cls or last (empty: keep the source model's)")
        from models import resolve_model_dir
        from models.condenser.configuration_condenser import check_architecture
        from training.arg_checks import check_model_dir, fit_max_length, model_config

        check_model_dir("--model", self.model)
        # The model's own check, run on its config.json now rather than after the tokenizer and corpus are read.
        config = model_config(resolve_model_dir(self.model))
        check_architecture(
            int(config.get("num_hidden_layers", 0)),
            early_layers=self.early_layers,
            head_layers=self.head_layers,
            backbone_mlm_weight=self.backbone_mlm_weight,
        )
        fit_max_length(self, "max_length", config, model_flag="--model", low=16)
