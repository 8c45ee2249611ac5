"""`vela train revela`: self-supervised retriever training through language modelling with in-batch attention.

    vela train revela --out DIR --lm LM_DIR --corpus BEIR_DIR|FILE.jsonl|COLLECTION_DIR [--model RETRIEVER]
    vela train revela --method replug ...      # the REPLUG distillation baseline (App. A.3), same data

The output is a plain encoder directory (LoRA merged, tokenizer, embedder config with the prefixes and pooling
it was trained with) that `vela eval` and the service load as an embedder, plus `training_args.json`.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.console import log_to_console
from training.run_record import write_training_record


def _method(argv: Sequence[str]) -> str:
    """The --method the command line (or its --config file, in either form) asks for: it picks the
    training-loop defaults, so it is read before the recipe's arguments are."""
    from training.cli_args import expand_config

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--method", default="revela")
    known, _ = parser.parse_known_args(expand_config(argv))
    return str(known.method)


def main(argv: Sequence[str]) -> int:
    from training.checkpoints import drop_default_checkpoints, no_empty_out
    from training.cli_args import given_flag_names, parse_recipe_args
    from training.revela.arguments import REPLUG_TRAINING_DEFAULTS, REVELA_TRAINING_DEFAULTS, RevelaArguments

    log_to_console()
    defaults = REPLUG_TRAINING_DEFAULTS if _method(argv) == "replug" else REVELA_TRAINING_DEFAULTS
    cargs, targs = parse_recipe_args(RevelaArguments, argv, prog="vela train revela", defaults=defaults, resumable=True)
    out = Path(targs.output_dir)
    with no_empty_out(out):
        run = _fit(cargs, targs)

    out.mkdir(parents=True, exist_ok=True)
    run.model.save_retriever(out, run.rtok, run.emb_config)
    if cargs.save_lm and cargs.method != "replug":
        run.model.save_lm(out / "lm", run.ltok)
    trainer = run.trainer
    history = [h for h in trainer.state.log_history if "loss" in h]
    record = {
        "command": " ".join([sys.argv[0], *(shlex.quote(a) for a in sys.argv[1:])]),
        "recipe_args": cargs.__dict__,
        "training_args": json.loads(targs.to_json_string()),
        "documents": run.documents,
        "chunks": len(run.data.chunks),
        "batches": len(run.data.batches),
        "steps": trainer.state.global_step,
        "loss_first": history[0]["loss"] if history else None,
        "loss_last": history[-1]["loss"] if history else None,
        "log_history": trainer.state.log_history,
        "train_seconds": round(run.seconds, 1),
        "stopped_by_time_budget": bool(run.budget and run.budget.stopped_early),
        "finished_at": time.time(),
    }
    write_training_record(out, record)
    drop_default_checkpoints(out, given_flag_names(argv))
    summary = {"out": str(out), "method": cargs.method, "steps": record["steps"], "loss_last": record["loss_last"]}
    print(json.dumps(summary))
    return 0


@dataclass
class _Trained:
    model: Any
    rtok: Any
    ltok: Any
    emb_config: Any
    trainer: Any
    data: Any
    documents: int
    budget: Any
    seconds: float


def _fit(cargs: Any, targs: Any) -> _Trained:
    """Read and batch the corpus, build retriever and LM, train (from the checkpoint, when resuming)."""
    import torch
    from transformers import set_seed

    from training.checkpoints import resume_fits
    from training.revela.dataset import BatchOrder, ChunkDataset, RevelaCollator, build_batches, read_corpus
    from training.revela.modeling import RetrieverLM, RevelaModel, load_lm, load_retriever
    from training.revela.replug import ReplugCollator, ReplugModel
    from training.revela.trainer import RevelaTrainer
    from training.time_budget import TimeBudgetCallback

    set_seed(targs.seed)
    documents = [doc for source in cargs.corpus for doc in read_corpus(source, max_docs=cargs.max_docs)]
    data = build_batches(
        documents,
        batch_size=cargs.batch_size,
        max_words=cargs.chunk_words,
        kind=cargs.text_kind,
        min_words=cargs.min_chunk_words,
        docs_per_group=cargs.interleave_docs,
        max_batches=cargs.max_batches,
        seed=targs.seed,
    )
    log = logging.getLogger("vela.train")
    log.info("%d documents, %d chunks, %d batches", len(documents), len(data.chunks), len(data.batches))

    retriever, rtok, emb_config = load_retriever(cargs)
    replug = cargs.method == "replug"
    # The frozen REPLUG teacher can sit in bf16; a trained LM keeps fp32 master weights (autocast does the rest).
    lm, ltok = load_lm(cargs, dtype=torch.bfloat16 if replug and targs.bf16 else torch.float32)
    collator_cls = ReplugCollator if replug else RevelaCollator
    collator = collator_cls(
        rtok,
        ltok,
        query_prefix=emb_config.query_prefix,
        document_prefix=emb_config.document_prefix,
        sim_text=cargs.sim_text,
        max_length=cargs.max_length,
        lm_max_length=cargs.lm_max_length,
    )
    model: RetrieverLM
    if replug:
        model = ReplugModel(
            retriever,
            lm,
            temperature=cargs.temperature,
            lm_temperature=cargs.lm_temperature,
            pairs_per_pass=cargs.replug_pairs_per_pass,
        )
    else:
        model = RevelaModel(retriever, lm, temperature=cargs.temperature, eps=cargs.v_norm_eps)
    budget = TimeBudgetCallback(cargs.max_minutes) if cargs.max_minutes else None
    resume = targs.resume_from_checkpoint
    callbacks = [c for c in (budget, resume_fits(resume) if resume else None) if c is not None]
    trainer = RevelaTrainer(
        model=model,
        args=targs,
        train_dataset=ChunkDataset(data),
        data_collator=collator,
        batch_order=BatchOrder(data.batches, targs.seed),
        callbacks=callbacks or None,
    )
    t0 = time.time()
    trainer.train(resume_from_checkpoint=resume)
    return _Trained(model, rtok, ltok, emb_config, trainer, data, len(documents), budget, time.time() - t0)


def main_replug(argv: Sequence[str]) -> int:
    """`vela train replug`, should it be registered as a recipe of its own."""
    return main(["--method", "replug", *argv])
