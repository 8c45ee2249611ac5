"""The steps every contrastive recipe shares: parse, build, plan batches, train, save weights + arguments."""

from __future__ import annotations

import logging
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from training.cli_args import parse_recipe_args


def train_recipe(
    name: str,
    argv: Sequence[str],
    *,
    args_cls: type,
    build: Callable[[Any], tuple[Any, Any, Any]],
    trainer_cls: type,
    save_weights: Callable[[Any, Path], None],
) -> int:
    from training.contrastive.collator import PairCollator
    from training.contrastive.dataset import BatchPlan, build_dataset
    from training.contrastive.trainer import save_run
    from training.losses.infonce import InfoNCELoss

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cargs: Any
    cargs, targs = parse_recipe_args(args_cls, argv, prog=f"vela train {name}")
    model, tokenizer, emb_config = build(cargs)
    data = build_dataset(cargs, targs.seed)
    plan = BatchPlan(data, cargs, targs.seed)
    logging.getLogger("vela.train").info(
        "%d pairs, %d steps, mean in-batch negative similarity %s", len(data), len(plan), plan.hardness
    )
    collator = PairCollator(data, tokenizer, emb_config, cargs.query_max_length, cargs.doc_max_length, cargs.fn_margin)
    trainer = trainer_cls(
        model=model,
        args=targs,
        train_dataset=data,
        data_collator=collator,
        plan=plan,
        loss_fn=InfoNCELoss(cargs.temperature),
        cargs=cargs,
    )
    t0 = time.time()
    trainer.train()
    seconds = time.time() - t0
    out = Path(targs.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_weights(model, out)
    tokenizer.save_pretrained(out)
    emb_config.save(out)
    command = f"vela train {name} " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    save_run(out, cargs=cargs, targs=targs, command=command, plan=plan, data=data, trainer=trainer, seconds=seconds)
    print(f"saved embedder to {out}")
    return 0
