"""`vela adapt --tower query` (the default): train the query encoder alone, against fixed document vectors.

Why the query side alone:
- a step encodes only short queries (48 tokens), never documents, so it costs about a tenth of a step of the
  two-sided recipe: the CPU budget buys thousands of steps instead of hundreds;
- the documents keep the vectors the collection's own embedder gave them (the table is encoded once, by the
  serving embedder), so the student learns to place queries in the space the index already holds;
- with the document side fixed, each step can score a query against its whole teacher list (the source and
  up to 2 x depth candidates) and distil the list (training/losses/listwise_kl.py) rather than one margin.

What is saved is not the trained query encoder itself but a point on the line from the base to it,
base + w (trained - base), w = --interpolation (0.5 by default): weight-space ensembling as in WiSE-FT (Wortsman
et al. 2022, arXiv 2109.01903). Fine-tuning on pseudo-queries also teaches their quirks (titles are not how
people ask); the midpoint keeps most of what was learnt about the corpus and more of what the base knew about
real queries. Measured on SciFact's train queries (never trained on): the midpoint scored higher than either end.

The result is an asymmetric embedder directory: the base model's files (the document encoder, unchanged) and
`query_encoder/`, the trained query side, named by `query_encoder` in vela_embedder.json (models/ loads it).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedTokenizerBase, Trainer

from models import EmbedderConfig, resolve_model_dir
from training.adapt.arguments import AdaptArguments
from training.adapt.dataset import ExampleDataset, ListExample
from training.contrastive.trainer import BiEncoder
from training.losses.listwise_kl import ListwiseKLLoss
from training.time_budget import TimeBudgetCallback

QUERY_ENCODER = "query_encoder"  # the subdirectory an asymmetric model keeps its query side in


def build(model: str) -> tuple[BiEncoder, Any, EmbedderConfig, Path]:
    """The query side to train (an asymmetric model's own query encoder, else the model itself), its tokenizer,
    its embedder config and the directory the document side comes from."""
    root = resolve_model_dir(model)
    config = EmbedderConfig.from_dir(root)
    weights = root / config.query_encoder if config.query_encoder else root
    tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
    return BiEncoder(AutoModel.from_pretrained(weights, local_files_only=True), config), tokenizer, config, root


def interpolate(start: dict[str, torch.Tensor], end: dict[str, torch.Tensor], weight: float) -> dict[str, torch.Tensor]:
    """start + weight (end - start) for every float tensor; integer buffers (position ids) come from `end`. On the
    device of `start` (the CPU copy taken before training): the trained weights may be on a GPU."""
    out: dict[str, torch.Tensor] = {}
    for k, v in end.items():
        v = v.detach().to(start[k].device) if k in start else v.detach()
        out[k] = start[k] + weight * (v - start[k]) if v.is_floating_point() else v
    return out


def save(
    student: BiEncoder,
    tokenizer: Any,
    config: EmbedderConfig,
    base: Path,
    out: Path,
    *,
    start: dict[str, torch.Tensor] | None = None,
    weight: float = 1.0,
) -> None:
    """An asymmetric model in `out`: the base's files (its document side) with the trained query side beside
    them, interpolated from `start` (the query side before training) by `weight`. (The registry copies `out`
    into place atomically; `out` itself is the recipe's work folder.)"""
    skip = {QUERY_ENCODER, "training_args.json"}

    def ignore(d: str, names: list[str]) -> list[str]:
        return [n for n in names if Path(d) == base and (n in skip or n.startswith(("checkpoint-", ".")))]

    shutil.copytree(base, out, ignore=ignore, dirs_exist_ok=True)
    state = student.backbone.state_dict()
    if start is not None and weight != 1.0:
        state = interpolate(start, state, weight)
    student.backbone.save_pretrained(out / QUERY_ENCODER, state_dict=state)
    tokenizer.save_pretrained(out)
    EmbedderConfig.from_dict({**config.to_dict(), "query_encoder": QUERY_ENCODER}).save(out)


@dataclass
class ListCollator:
    """Tokenised queries and their teacher lists padded to one width: rows (B, C), teacher (B, C), mask (B, C)."""

    data: ExampleDataset
    tokenizer: PreTrainedTokenizerBase
    embedder_config: EmbedderConfig
    query_max_length: int

    def __call__(self, indices: list[int]) -> dict[str, Any]:
        exs: list[ListExample] = [self.data.examples[i] for i in indices]
        width = max(len(e.rows) for e in exs)
        rows = torch.zeros((len(exs), width), dtype=torch.long)
        teacher = torch.zeros((len(exs), width))
        mask = torch.zeros((len(exs), width), dtype=torch.bool)
        for i, e in enumerate(exs):
            rows[i, : len(e.rows)] = torch.from_numpy(e.rows)
            teacher[i, : len(e.rows)] = torch.from_numpy(e.teacher)
            mask[i, : len(e.rows)] = True
        texts = [self.embedder_config.query_prefix + e.query for e in exs]
        tok = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.query_max_length, return_tensors="pt"
        )
        queries = {"input_ids": tok["input_ids"], "attention_mask": tok["attention_mask"]}
        return {"queries": queries, "rows": rows, "teacher": teacher, "mask": mask}


class QueryTowerTrainer(Trainer):
    def __init__(self, *a: Any, documents: torch.Tensor, loss: ListwiseKLLoss, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.documents = documents  # (N, d) unit rows, fixed: the collection embedder's document vectors
        self.listwise = loss

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        q = nn.functional.normalize(model(**inputs["queries"]).float(), dim=-1)  # (B, d)
        rows, teacher, mask = inputs["rows"].to(q.device), inputs["teacher"], inputs["mask"].to(q.device)
        if rows.shape[1] == 1:
            # No teacher (the ablation): the batch's sources are the list, each query's own the one answer;
            # another query's copy of the same source is left out rather than counted wrong.
            src = rows[:, 0]  # (B,)
            rows = src.expand(len(src), -1)  # (B, B)
            eye = torch.eye(len(src), dtype=torch.bool, device=q.device)
            mask = eye | (src[:, None] != src[None, :])  # (B, B)
            teacher = torch.where(eye, 0.0, -1e4)  # (B, B): one-hot after the softmax
        docs = self.documents.to(q.device)[rows]  # (B, C, d)
        scores = torch.einsum("bd,bcd->bc", q, docs)  # (B, C) cosines
        loss = self.listwise(scores, teacher, mask)
        return (loss, {"q": q}) if return_outputs else loss


def train(
    examples: list[ListExample],
    vectors: np.ndarray,
    args: AdaptArguments,
    *,
    model: str,
    out: Path,
    minutes: float,
) -> dict[str, Any]:
    """Train the query side on the teacher lists for at most `minutes`; save the asymmetric model to `out`."""
    from transformers import set_seed

    from training.adapt.trainer import CheckpointCallback, run_record, training_arguments

    set_seed(args.seed)
    student, tokenizer, config, base = build(model)
    start = {k: v.detach().clone() for k, v in student.backbone.state_dict().items()}  # the query side untrained

    def save_to(path: Path) -> None:
        save(student, tokenizer, config, base, path, start=start, weight=args.interpolation)

    data = ExampleDataset(examples)
    targs = training_arguments(args, out, weight_decay=0.01)
    ckpt = CheckpointCallback(args.checkpoint_minutes, lambda m: save_to(out / f"checkpoint-{m:g}min"))
    trainer = QueryTowerTrainer(
        model=student,
        args=targs,
        train_dataset=data,
        data_collator=ListCollator(data, tokenizer, config, args.query_max_length),
        callbacks=[TimeBudgetCallback(max(minutes, 1e-3)), ckpt],
        documents=torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32)),
        loss=ListwiseKLLoss(args.temperature, args.teacher_temperature),
    )
    t0 = time.time()
    trainer.train()
    seconds = time.time() - t0
    save_to(out)
    return {**run_record(trainer, args, len(examples), seconds, ckpt), "interpolation": args.interpolation}
