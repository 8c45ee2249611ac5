"""`vela train condenser`: Condenser MLM pretraining of a BERT-family encoder on raw corpora.

After pretraining the head is dropped and the backbone is saved as a plain encoder directory (tokenizer and
embedder config included) that `vela train contrastive|cde --model DIR` start from and `vela eval` loads.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from training.console import log_to_console
from training.run_record import write_training_record


def main(argv: Sequence[str]) -> int:
    from transformers import AutoTokenizer, set_seed

    from models import EmbedderConfig, resolve_model_dir
    from models.condenser import CondenserForPretraining
    from training.checkpoints import drop_default_checkpoints, no_empty_out, resume_fits
    from training.cli_args import given_flag_names, parse_recipe_args
    from training.condenser.arguments import CONDENSER_TRAINING_DEFAULTS, CondenserArguments
    from training.condenser.dataset import PassageDataset, chunk_corpora, split_held_out
    from training.condenser.trainer import CondenserTrainer, PassageMasker, held_out_mlm_loss

    log_to_console()
    log = logging.getLogger("vela.train")
    cargs, targs = parse_recipe_args(
        CondenserArguments, argv, prog="vela train condenser", defaults=CONDENSER_TRAINING_DEFAULTS, resumable=True
    )
    out = Path(targs.output_dir)
    with no_empty_out(out):
        set_seed(targs.seed)
        root = resolve_model_dir(cargs.model)
        tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        chunks = chunk_corpora(cargs.corpus, tokenizer, max_length=cargs.max_length, min_tokens=cargs.min_tokens)
        train, held = split_held_out(chunks, fraction=cargs.eval_fraction, cap=cargs.max_eval_passages, seed=targs.seed)
        model = CondenserForPretraining.from_backbone(
            root, early_layers=cargs.early_layers, head_layers=cargs.head_layers, weight=cargs.backbone_mlm_weight
        )
        before = held_out_mlm_loss(model, held, tokenizer, probability=cargs.mlm_probability)
        log.info("%d passages (%d held out); held-out MLM loss before %s", len(chunks), len(held), before)
        resume = targs.resume_from_checkpoint
        trainer = CondenserTrainer(
            model=model,
            args=targs,
            train_dataset=PassageDataset(train),
            data_collator=PassageMasker(tokenizer, mlm_probability=cargs.mlm_probability, seed=targs.seed),
            processing_class=tokenizer,
            callbacks=[resume_fits(resume)] if resume else None,
        )
        t0 = time.time()
        trainer.train(resume_from_checkpoint=resume)
        seconds = time.time() - t0
    after = held_out_mlm_loss(model, held, tokenizer, probability=cargs.mlm_probability)
    log.info("held-out MLM loss after %s", after)

    out.mkdir(parents=True, exist_ok=True)
    model.backbone().save_pretrained(out)  # the head is dropped: a plain encoder
    tokenizer.save_pretrained(out)
    emb_config = EmbedderConfig.from_dir(root)
    if cargs.pooling:
        emb_config = replace(emb_config, pooling=cargs.pooling)
    emb_config.save(out)
    record = {
        "command": " ".join([sys.argv[0], *(shlex.quote(a) for a in sys.argv[1:])]),  # argv[0]: vela train condenser
        "recipe_args": cargs.__dict__,
        "training_args": json.loads(targs.to_json_string()),
        "passages": {"train": len(train), "held_out": len(held)},
        "steps": trainer.state.global_step,
        "held_out_mlm_loss": {"before": before, "after": after},
        "log_history": trainer.state.log_history,
        "train_seconds": round(seconds, 1),
    }
    write_training_record(out, record)
    drop_default_checkpoints(out, given_flag_names(argv))
    print(json.dumps({"out": str(out), "steps": record["steps"], "held_out_mlm_loss": record["held_out_mlm_loss"]}))
    return 0
