"""`vela train reranker --out DIR [--config FILE] [flags]`: train a cross-encoder with the HF Trainer.

Flags are the fields of ModelArguments, DataArguments and RerankerTrainingArguments (HF TrainingArguments
with RankMamba's defaults); a --config JSON/YAML file sets any of them, and command-line flags win over it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

from training.cli_args import expand_config
from training.reranker.arguments import DataArguments, ModelArguments, RerankerTrainingArguments

DESCRIPTION = __doc__
DEV_QUERIES_FILE = "dev_queries.txt"  # the held-out query ids, one per line: `vela eval --query-ids` reads it


def parse(argv: list[str]) -> tuple[ModelArguments, DataArguments, RerankerTrainingArguments, Path]:
    from transformers import HfArgumentParser

    argv = expand_config(argv)
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--out")
    known, _ = first.parse_known_args(argv)
    parser = HfArgumentParser(
        (ModelArguments, DataArguments, RerankerTrainingArguments),  # type: ignore[arg-type]
        prog="vela train reranker",
        description=DESCRIPTION,
    )
    parser.add_argument("--out", required=True, help="directory of the trained reranker (weights + arguments JSON)")
    parser.add_argument(
        "--config", default=None, help="JSON or YAML file of flags; command-line flags win"
    )  # expanded above
    if known.out:  # Trainer logs (and checkpoints, if asked) go there too, unless --output_dir says otherwise
        parser.set_defaults(output_dir=known.out)
    model_args, data_args, train_args, rest = parser.parse_args_into_dataclasses(args=argv)
    return model_args, data_args, train_args, Path(rest.out)


def main(argv: list[str]) -> int:
    try:
        model_args, data_args, train_args, out = parse(argv)
    except ValueError as exc:
        print(f"vela train reranker: error: {exc}", file=sys.stderr)
        return 2
    from transformers import set_seed

    from models.reranker import RerankerProcessor
    from training.reranker.collator import RerankerCollator
    from training.reranker.dataset import GroupDataset, build_groups
    from training.reranker.modeling import build, save
    from training.reranker.trainer import RerankerTrainer
    from velaio.beir import write_query_ids

    t0 = time.time()
    set_seed(train_args.seed)
    model, tokenizer = build(model_args)
    config = model.get_base_model().config if model_args.lora else model.config
    groups, stats = build_groups(data_args, seed=train_args.seed)
    group_size = 1 + data_args.negatives
    trainer = RerankerTrainer(
        model=model,
        args=train_args,
        train_dataset=GroupDataset(groups),
        data_collator=RerankerCollator(RerankerProcessor(tokenizer, config), group_size),
        processing_class=tokenizer,
        group_size=group_size,
    )
    result = trainer.train()
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
    shown = {k: v for k, v in stats.items() if k != "dev_query_ids"}
    print(json.dumps({"out": str(out), **shown, **result.metrics, "seconds": arguments["seconds"]}, indent=2))
    return 0


__all__ = ["main", "parse"]
