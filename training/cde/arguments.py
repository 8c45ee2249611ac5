"""Arguments of `vela train cde`: the contrastive ones plus the two-stage model's."""

from __future__ import annotations

from dataclasses import dataclass, field

from training.contrastive.arguments import ContrastiveArguments


@dataclass
class CdeArguments(ContrastiveArguments):
    corpus_context_size: int = field(
        default=32, metadata={"help": "J: context documents (training: sampled from the batch's own documents)"}
    )
    sequence_dropout_prob: float = field(default=0.005, metadata={"help": "p of replacing a context row by v_null"})
    first_stage: str = field(default="", metadata={"help": "M1 init (default: --model)"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.corpus_context_size < 1:
            raise ValueError("corpus_context_size must be >= 1")
        if not 0.0 <= self.sequence_dropout_prob < 1.0:
            raise ValueError(f"sequence_dropout_prob must be in [0, 1), got {self.sequence_dropout_prob}")
        if self.first_stage:
            from training.arg_checks import check_model_dir

            check_model_dir("--first_stage", self.first_stage)
