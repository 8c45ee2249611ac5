"""Arguments of `vela adapt`: label-free domain adaptation of an embedder on a collection's own documents.

Defaults are the recipe measured in bench/results/adapt-*.json (docs/adapt.md says why each was chosen).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TEACHERS = ("hybrid", "none")
TOWERS = ("query", "both")


@dataclass
class AdaptArguments:
    student: str = field(
        default="",
        metadata={"help": "start from this model (a registered name or a directory; empty: the collection's own)"},
    )
    max_minutes: float = field(
        default=12.0, metadata={"help": "wall-clock budget of the whole run: pseudo-labels, then training"}
    )
    tower: str = field(
        default="query",
        metadata={
            "help": "query: train the query encoder alone against the collection's document vectors (listwise "
            "distillation; documents keep their vectors); both: one encoder for both sides (margin-MSE)"
        },
    )
    queries: str = field(
        default="",
        metadata={
            "help": "a file of unlabelled queries (one per line, or JSON lines with 'text'), e.g. from a "
            "query log, used beside the pseudo-queries"
        },
    )
    title_queries: bool = field(
        default=True,
        metadata={
            "help": "a pseudo-query per titled document (its title; its first passage the positive); "
            "titles alone where half the documents give one"
        },
    )
    queries_per_doc: int = field(
        default=2,
        metadata={"help": "sentence pseudo-queries cut from each document where titles are too few (ICT rounds)"},
    )
    max_queries: int = field(default=6000, metadata={"help": "most pseudo-queries in all (0: no cap)"})
    teacher: str = field(
        default="hybrid",
        metadata={"help": "hybrid: the collection's own BM25 + dense ranker scores, filters and mines; none: ablation"},
    )
    fusion_alpha: float = field(default=0.5, metadata={"help": "teacher: dense share of the z-score combination"})
    depth: int = field(
        default=50,
        metadata={"help": "teacher: documents from each of its two lists (query: the list; both: negatives' pool)"},
    )
    negatives: int = field(
        default=1, metadata={"help": "--tower both: mined negatives per pseudo-query (sampled each epoch)"}
    )
    skip_top: int = field(
        default=2, metadata={"help": "--tower both: teacher ranks skipped when mining (likely false negatives)"}
    )
    consistency_top_k: int = field(
        default=20,
        metadata={"help": "--tower both: keep a pseudo-query only if its source is in the teacher's top k (0: off)"},
    )
    margin_mse_weight: float = field(
        default=1.0, metadata={"help": "--tower both: weight of margin-MSE beside InfoNCE (0: off)"}
    )
    infonce_weight: float = field(
        default=0.0, metadata={"help": "--tower both: weight of InfoNCE (in-batch + mined negatives)"}
    )
    student_scale: float = field(
        default=20.0, metadata={"help": "--tower both: margin-MSE: student cosine margin scale"}
    )
    temperature: float = field(default=0.05, metadata={"help": "student temperature (InfoNCE, listwise)"})
    teacher_temperature: float = field(default=1.0, metadata={"help": "listwise: teacher temperature, z units"})
    interpolation: float = field(
        default=0.5,
        metadata={
            "help": "--tower query: save base + w (trained - base), weight-space ensembling (WiSE-FT); 1: the "
            "trained weights as they are"
        },
    )
    batch_size: int = field(default=64)
    learning_rate: float = field(default=3e-5)
    warmup_steps: int = field(default=10)
    query_max_length: int = field(default=48)  # pseudo-queries are cut at 32 words
    doc_max_length: int = field(default=128)  # cheaper steps; passages are <= 224 tokens
    bf16: bool = field(default=True, metadata={"help": "CPU autocast in bf16 (about 3x faster here)"})
    checkpoint_minutes: list[float] = field(
        default_factory=list, metadata={"help": "also save the model after these minutes of training (for plots)"}
    )
    seed: int = field(default=0)
    logging_steps: int = field(default=10)

    def __post_init__(self) -> None:
        from training.arg_checks import check_finite

        # The one check of these numbers, for `vela adapt` and programmatic use (the bench) alike; messages name the
        # flag, since the command line prints them as they are.
        check_finite(vars(self))  # NaN passes every range check below
        bad = [m for m in self.checkpoint_minutes if not m > 0]
        if bad:
            raise ValueError(f"--checkpoint_minutes must each be > 0 (minutes of training), got {bad[0]:g}")
        if self.max_queries < 0:  # 0 is "no cap"; a negative cap would fail only after the pseudo-labelling
            raise ValueError(f"--max_queries must be >= 1 (0: no cap), got {self.max_queries}")
        if self.tower not in TOWERS:
            raise ValueError(f"tower must be one of {TOWERS}, got {self.tower!r}")
        if self.teacher_temperature <= 0 or self.temperature <= 0:
            raise ValueError("temperatures must be > 0")
        if self.teacher not in TEACHERS:
            raise ValueError(f"teacher must be one of {TEACHERS}, got {self.teacher!r}")
        if self.max_minutes <= 0:
            raise ValueError("max_minutes must be > 0")
        if self.batch_size < 2 or self.queries_per_doc < 0 or self.negatives < 0:
            raise ValueError("batch_size >= 2, queries_per_doc >= 0 and negatives >= 0 are needed")
        if self.queries and self.tower != "query":
            raise ValueError("--queries is read by --tower query (a logged query has no source to pair with)")
        if self.queries_per_doc == 0 and not self.queries and not self.title_queries:
            raise ValueError("no queries: give --queries, --title_queries true or --queries_per_doc > 0")
        if self.margin_mse_weight <= 0 and self.infonce_weight <= 0:
            raise ValueError("margin_mse_weight or infonce_weight must be > 0")
        if not 0.0 < self.interpolation <= 1.0:
            raise ValueError(f"interpolation must be in (0, 1], got {self.interpolation}")
        if not 0.0 <= self.fusion_alpha <= 1.0:
            raise ValueError("fusion_alpha must be within [0, 1]")
