"""`vela train reranker --out DIR [--config FILE] [--register NAME] [flags]`: train a cross-encoder with the HF
Trainer.

Flags are the fields of ModelArguments, DataArguments and RerankerTrainingArguments (HF TrainingArguments
with RankMamba's defaults); a --config JSON/YAML file sets any of them, and command-line flags win over it.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from training.reranker.arguments import DataArguments, ModelArguments, RerankerTrainingArguments

DEV_QUERIES_FILE = "dev_queries.txt"  # the held-out query ids, one per line: `vela eval --query-ids` reads it


def parse(argv: list[str]) -> tuple[ModelArguments, DataArguments, RerankerTrainingArguments, Path]:
    """The recipe's arguments and `--out`, read as every recipe reads them (training/cli_args.py): checkpoints
    by default, `--resume_from_checkpoint PATH|true`, and bad arguments exit 2 with one line."""
    from training.cli_args import parse_dataclasses

    types = (ModelArguments, DataArguments, RerankerTrainingArguments)
    model_args, data_args, train_args = parse_dataclasses(types, argv, prog="vela train reranker", resumable=True)
    return model_args, data_args, train_args, Path(train_args.output_dir)


def main(argv: list[str]) -> int:
    model_args, data_args, train_args, out = parse(argv)

    from training.checkpoints import drop_default_checkpoints, no_empty_out
    from training.cli_args import given_flag_names
    from training.reranker.modeling import save
    from velaio.beir import write_query_ids

    t0 = time.time()
    with no_empty_out(out):
        trainer, tokenizer, result, stats = _fit(model_args, data_args, train_args)
    arguments = {
        "command": " ".join([sys.argv[0], *(shlex.quote(a) for a in argv)]),
        "model": asdict(model_args),
        "data": asdict(data_args),
        "training": train_args.to_dict(),
        "data_stats": stats,
        "train_metrics": result.metrics,
        "log_history": trainer.state.log_history,
        "seconds": round(time.time() - t0, 1),
    }
    save(trainer.model, tokenizer, out, arguments)
    if stats["dev_query_ids"]:
        write_query_ids(out / DEV_QUERIES_FILE, stats["dev_query_ids"])
    drop_default_checkpoints(out, given_flag_names(argv))
    shown = {k: v for k, v in stats.items() if k != "dev_query_ids"}
    print(json.dumps({"out": str(out), **shown, **result.metrics, "seconds": arguments["seconds"]}, indent=2))
    return 0


def _fit(
    model_args: ModelArguments, data_args: DataArguments, train_args: RerankerTrainingArguments
) -> tuple[Any, Any, Any, dict[str, Any]]:
    """Build, group and train (from the checkpoint, when resuming): (trainer, tokenizer, train output, data stats)."""
    from transformers import set_seed

    from models.reranker import RerankerProcessor
    from training.checkpoints import resume_fits
    from training.reranker.collator import RerankerCollator
    from training.reranker.dataset import GroupDataset, build_groups
    from training.reranker.modeling import build
    from training.reranker.trainer import RerankerTrainer

    set_seed(train_args.seed)
    model, tokenizer = build(model_args)
    config = model.get_base_model().config if model_args.lora else model.config
    groups, stats = build_groups(data_args, seed=train_args.seed)
    group_size = 1 + data_args.negatives
    resume = train_args.resume_from_checkpoint
    trainer = RerankerTrainer(
        model=model,
        args=train_args,
        train_dataset=GroupDataset(groups),
        data_collator=RerankerCollator(RerankerProcessor(tokenizer, config), group_size),
        processing_class=tokenizer,
        group_size=group_size,
        callbacks=[resume_fits(resume)] if resume else None,
    )
    return trainer, tokenizer, trainer.train(resume_from_checkpoint=resume), stats


__all__ = ["main", "parse"]
