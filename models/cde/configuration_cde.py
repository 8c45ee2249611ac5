"""Configuration of a contextual document embedder (CDE, Morris & Rush 2024): two encoders called in sequence.

The first stage M1 embeds J context documents of a corpus; the second stage M2 reads those J vectors followed by
the token embeddings of the text, and pools over the text tokens only. Both backbones are stored as full
sub-configurations, so a saved model loads with one `AutoModel.from_pretrained(dir)` call.
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import AutoConfig, PreTrainedConfig
from transformers.configuration_utils import SubConfigSpec


@strict
class CdeConfig(PreTrainedConfig):
    model_type = "vela_cde"
    sub_configs_defaults = {
        "first_stage": SubConfigSpec(config_class=AutoConfig, model_type="bert"),
        "second_stage": SubConfigSpec(config_class=AutoConfig, model_type="bert"),
    }

    first_stage: PreTrainedConfig | dict | None = None
    second_stage: PreTrainedConfig | dict | None = None
    # J: context documents per corpus (at training time, at most the batch's own documents).
    corpus_context_size: int = 32
    # Training only: each context row is replaced by the learned null vector with this probability.
    sequence_dropout_prob: float = 0.005

    def validate_architecture(self) -> None:
        if self.corpus_context_size < 1:
            raise ValueError(f"corpus_context_size must be >= 1, got {self.corpus_context_size}")
        if not 0.0 <= self.sequence_dropout_prob < 1.0:
            raise ValueError(f"sequence_dropout_prob must be in [0, 1), got {self.sequence_dropout_prob}")

    @classmethod
    def from_backbones(cls, first: PreTrainedConfig, second: PreTrainedConfig, **kwargs: object) -> CdeConfig:
        return cls(first_stage=first.to_dict(), second_stage=second.to_dict(), **kwargs)  # type: ignore[arg-type]
