"""Arguments of the contrastive recipes (the bi-encoder one and, extended, CDE). Training-loop settings
(learning rate, steps, bf16, seed, ...) are the HF `TrainingArguments`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ContrastiveArguments:
    model: str = field(default="default", metadata={"help": "'default' (packaged MiniLM) or a local model dir"})
    pairs: list[str] = field(
        default_factory=list,
        metadata={"help": "pair sources: qrels:<beir dir>[:split] and/or mine:<beir dir|jsonl> (repeatable)"},
    )
    max_pairs: int = field(default=0, metadata={"help": "use at most this many pairs (0: all), seeded sample"})
    epochs: int = field(default=1, metadata={"help": "passes over the pairs; batches are re-packed each epoch"})
    batch_size: int = field(default=32, metadata={"help": "pairs per step (the in-batch negatives)"})
    query_max_length: int = field(default=64)
    doc_max_length: int = field(default=192)
    temperature: float = field(default=0.02, metadata={"help": "InfoNCE temperature tau"})
    batching: str = field(default="cluster", metadata={"help": "cluster (adversarial, CDE 4.1) or random"})
    packing: str = field(default="tsp", metadata={"help": "tsp (greedy tour over centroids) or random"})
    cluster_size: int = field(default=0, metadata={"help": "target pairs per K-means cluster (0: batch_size)"})
    fn_margin: float = field(
        default=0.05, metadata={"help": "drop negatives the surrogate scores >= positive + margin (<0: off)"}
    )
    surrogate: str = field(default="default", metadata={"help": "embedder for clustering and filtering"})
    grad_cache: bool = field(default=False, metadata={"help": "gradient caching: big batches on small memory"})
    grad_cache_chunk: int = field(default=8, metadata={"help": "texts per forward pass with grad_cache"})
    lora_r: int = field(default=0, metadata={"help": "LoRA rank through peft (0: full fine-tuning)"})
    lora_alpha: int = field(default=32)

    def __post_init__(self) -> None:
        if self.batching not in ("cluster", "random") or self.packing not in ("tsp", "random"):
            raise ValueError("batching must be cluster|random and packing tsp|random")
        if self.batch_size < 2:
            raise ValueError("batch_size must be >= 2 (in-batch negatives)")
        if self.epochs < 1 or self.grad_cache_chunk < 1:
            raise ValueError("epochs and grad_cache_chunk must be >= 1")
