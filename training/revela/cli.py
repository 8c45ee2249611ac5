"""`vela train revela`: self-supervised retriever training through language modelling with in-batch attention.

    vela train revela --out DIR --lm LM_DIR --corpus BEIR_DIR|FILE.jsonl|COLLECTION_DIR [--model RETRIEVER]
    vela train revela --method replug ...      # the REPLUG distillation baseline (App. A.3), same data

The output is a plain encoder directory (LoRA merged, tokenizer, embedder config with the prefixes and pooling
it was trained with) that `vela eval` and the service load as an embedder, plus `training_args.json`.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def _method(argv: Sequence[str]) -> str:
    """The --method the command line (or its --config file) asks for: it picks the training-loop defaults."""
    from training.cli_args import _config_to_flags

    flags = list(argv)
    if "--config" in flags:
        flags = _config_to_flags(Path(flags[flags.index("--config") + 1])) + flags
    method = "revela"
    for i, flag in enumerate(flags[:-1]):
        if flag == "--method":
            method = flags[i + 1]
    return method


def main(argv: Sequence[str]) -> int:
    import torch
    from transformers import set_seed

    from training.cli_args import parse_recipe_args
    from training.revela.arguments import REPLUG_TRAINING_DEFAULTS, REVELA_TRAINING_DEFAULTS, RevelaArguments
    from training.revela.dataset import BatchOrder, ChunkDataset, RevelaCollator, build_batches, read_corpus
    from training.revela.modeling import RetrieverLM, RevelaModel, load_lm, load_retriever
    from training.revela.replug import ReplugCollator, ReplugModel
    from training.revela.trainer import RevelaTrainer
    from training.time_budget import TimeBudgetCallback

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    log = logging.getLogger("vela.train")
    defaults = REPLUG_TRAINING_DEFAULTS if _method(argv) == "replug" else REVELA_TRAINING_DEFAULTS
    cargs, targs = parse_recipe_args(RevelaArguments, argv, prog="vela train revela", defaults=defaults)
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
    trainer = RevelaTrainer(
        model=model,
        args=targs,
        train_dataset=ChunkDataset(data),
        data_collator=collator,
        batch_order=BatchOrder(data.batches, targs.seed),
        callbacks=[budget] if budget else None,
    )
    t0 = time.time()
    trainer.train()
    seconds = time.time() - t0

    out = Path(targs.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_retriever(out, rtok, emb_config)
    if cargs.save_lm and not replug:
        model.save_lm(out / "lm", ltok)
    history = [h for h in trainer.state.log_history if "loss" in h]
    record = {
        "command": " ".join([sys.argv[0], *(shlex.quote(a) for a in sys.argv[1:])]),
        "recipe_args": cargs.__dict__,
        "training_args": json.loads(targs.to_json_string()),
        "documents": len(documents),
        "chunks": len(data.chunks),
        "batches": len(data.batches),
        "steps": trainer.state.global_step,
        "loss_first": history[0]["loss"] if history else None,
        "loss_last": history[-1]["loss"] if history else None,
        "log_history": trainer.state.log_history,
        "train_seconds": round(seconds, 1),
        "stopped_by_time_budget": bool(budget and budget.stopped_early),
        "finished_at": time.time(),
    }
    tmp = out / "training_args.json.tmp"
    tmp.write_text(json.dumps(record, indent=2, default=str))
    tmp.replace(out / "training_args.json")
    summary = {"out": str(out), "method": cargs.method, "steps": record["steps"], "loss_last": record["loss_last"]}
    print(json.dumps(summary))
    return 0


def main_replug(argv: Sequence[str]) -> int:
    """`vela train replug`, should it be registered as a recipe of its own."""
    return main(["--method", "replug", *argv])
