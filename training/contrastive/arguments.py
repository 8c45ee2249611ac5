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
    # Teacher-scored data (training/data/hard_negatives.py); all off by default.
    hard_negatives: int = field(default=0, metadata={"help": "H: mined hard negatives per query (Eq. 3-4)"})
    teacher: str = field(default="", metadata={"help": "miner/filter: 'bm25' or an embedder (default: --surrogate)"})
    mining_margin: float = field(default=0.95, metadata={"help": "negatives must score < pos_sim * margin (Eq. 5)"})
    consistency_top_k: int = field(
        default=0, metadata={"help": "keep a pair only if its document is in the teacher's top-k (0: off)"}
    )
    negatives_corpus: str = field(
        default="", metadata={"help": "BEIR dir or JSONL whose documents join the pairs' own as the mining pool"}
    )
    share_hard_negatives: bool = field(
        default=False, metadata={"help": "every query also scores the other queries' hard negatives"}
    )
    matryoshka_dims: list[int] = field(
        default_factory=list, metadata={"help": "prefix dims trained besides the full one (Matryoshka; none: off)"}
    )

    def __post_init__(self) -> None:
        from models import resolve_model_dir
        from training.arg_checks import check_model_dir, check_pair_sources, fit_max_length, hidden_size, model_config

        check_pair_sources(self.pairs)
        if self.batching not in ("cluster", "random") or self.packing not in ("tsp", "random"):
            raise ValueError("batching must be cluster|random and packing tsp|random")
        if self.batch_size < 2:
            raise ValueError("batch_size must be >= 2 (in-batch negatives)")
        if self.epochs < 1 or self.grad_cache_chunk < 1:
            raise ValueError("epochs and grad_cache_chunk must be >= 1")
        if self.hard_negatives < 0 or self.consistency_top_k < 0:
            raise ValueError("hard_negatives and consistency_top_k must be >= 0")
        if not 0.0 < self.mining_margin <= 1.0:
            raise ValueError(f"mining_margin must be in (0, 1], got {self.mining_margin}")
        if not self.temperature > 0:  # `not >`: NaN is refused too
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.lora_r < 0 or self.max_pairs < 0:
            raise ValueError("lora_r and max_pairs must be >= 0")
        check_model_dir("--model", self.model)
        if self.teacher and self.teacher != "bm25":  # refused even when no mining asks for it: a typo all the same
            check_model_dir("--teacher", self.teacher)
        config = model_config(resolve_model_dir(self.model))
        fit_max_length(self, "query_max_length", config, model_flag="--model")
        fit_max_length(self, "doc_max_length", config, model_flag="--model")
        self.check_matryoshka_dims(hidden_size(config))

    def check_matryoshka_dims(self, full: int | None) -> None:
        """Each dim is a prefix of the embedding: 1 <= m <= its size (m = the size is the full one, always
        trained). A dim past it would be dropped without a word."""
        for m in self.matryoshka_dims:
            if m < 1 or (full is not None and m > full):
                size = f"the model's {full} dimensions" if full is not None else "the model's dimension"
                raise ValueError(f"--matryoshka_dims {m}: each dim must be in [1, {size}]")
