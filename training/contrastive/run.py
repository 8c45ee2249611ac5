"""The steps every contrastive recipe shares: parse, build, plan batches, train (or go on from a checkpoint),
save weights + arguments."""

from __future__ import annotations

import logging
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.checkpoints import CHECKPOINT_FLAGS, drop_checkpoints, remove_if_empty, resume_fits
from training.cli_args import given_flag_names, parse_recipe_args
from training.console import log_to_console


def train_recipe(
    name: str,
    argv: Sequence[str],
    *,
    args_cls: type,
    build: Callable[[Any], tuple[Any, Any, Any]],
    trainer_cls: type,
    save_weights: Callable[[Any, Path], None],
) -> int:
    log_to_console()
    cargs: Any
    cargs, targs = parse_recipe_args(args_cls, argv, prog=f"vela train {name}", resumable=True)
    out = Path(targs.output_dir)
    new_folder = not out.exists()
    try:
        run = _fit(cargs, targs, build=build, trainer_cls=trainer_cls)
    except BaseException:  # an interrupt or a failure before anything was saved leaves no empty --out behind
        if new_folder:
            remove_if_empty(out)
        raise
    from training.contrastive.trainer import save_run

    out.mkdir(parents=True, exist_ok=True)
    save_weights(run.model, out)
    run.tokenizer.save_pretrained(out)
    run.emb_config.save(out)
    command = f"vela train {name} " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    save_run(
        out,
        cargs=cargs,
        targs=targs,
        command=command,
        plan=run.plan,
        data=run.data,
        trainer=run.trainer,
        seconds=run.seconds,
    )
    if not given_flag_names(argv) & set(CHECKPOINT_FLAGS):  # ours, for resuming; the user asked for none
        drop_checkpoints(out)
    print(f"saved embedder to {out}")
    return 0


@dataclass
class _Trained:
    model: Any
    tokenizer: Any
    emb_config: Any
    trainer: Any
    plan: Any
    data: Any
    seconds: float


def _fit(cargs: Any, targs: Any, *, build: Callable[[Any], tuple[Any, Any, Any]], trainer_cls: type) -> _Trained:
    """Build, plan and train (from the checkpoint, when resuming)."""
    from training.contrastive.collator import HardNegativeCollator
    from training.contrastive.dataset import BatchPlan, build_dataset

    model, tokenizer, emb_config = build(cargs)
    data = build_dataset(cargs, targs.seed)
    data, mined = teacher_step(data, cargs, targs.seed)
    plan = BatchPlan(data, cargs, targs.seed)
    logging.getLogger("vela.train").info(
        "%d pairs, %d steps, mean in-batch negative similarity %s", len(data), len(plan), plan.hardness
    )
    collator = HardNegativeCollator(
        data,
        tokenizer,
        emb_config,
        cargs.query_max_length,
        cargs.doc_max_length,
        cargs.fn_margin,
        mined=mined,
        share_hard_negatives=cargs.share_hard_negatives,
    )
    loss_fn, emb_config = make_loss(cargs, model, emb_config)
    resume = targs.resume_from_checkpoint
    trainer = trainer_cls(
        model=model,
        args=targs,
        train_dataset=data,
        data_collator=collator,
        plan=plan,
        loss_fn=loss_fn,
        cargs=cargs,
        callbacks=[resume_fits(resume)] if resume else None,
    )
    t0 = time.time()
    trainer.train(resume_from_checkpoint=resume)
    return _Trained(model, tokenizer, emb_config, trainer, plan, data, time.time() - t0)


def teacher_step(data: Any, cargs: Any, seed: int) -> tuple[Any, Any]:
    """Consistency filtering and hard-negative mining with the teacher, when asked: (pairs kept, mined or None)."""
    if not (cargs.hard_negatives or cargs.consistency_top_k):
        return data, None
    from training.contrastive.dataset import PairDataset
    from training.data.hard_negatives import build_pool, load_teacher, mine

    pool = build_pool(data.pairs, cargs.negatives_corpus or None)
    teacher = load_teacher(cargs.teacher or cargs.surrogate, pool)
    mined = mine(
        data.pairs,
        pool,
        teacher,
        hard_negatives=cargs.hard_negatives,
        margin=cargs.mining_margin,
        consistency_top_k=cargs.consistency_top_k,
        seed=seed,
    )
    rows = mined.keep.nonzero()[0]
    kept = PairDataset([data.pairs[i] for i in rows], data.q_vecs[rows], data.d_vecs[rows])
    return kept, (mined.subset(rows) if cargs.hard_negatives else None)


def make_loss(cargs: Any, model: Any, emb_config: Any) -> tuple[Any, Any]:
    """InfoNCE, or Matryoshka InfoNCE whose dims (full dim first) are then recorded in the embedder config."""
    from models import EmbedderConfig
    from training.losses.infonce import InfoNCELoss
    from training.losses.matryoshka import MatryoshkaInfoNCELoss, resolve_dims

    dims = [m for m in cargs.matryoshka_dims if m > 0]
    if not dims:
        return InfoNCELoss(cargs.temperature), emb_config
    full = getattr(model.config, "hidden_size", None) or model.hidden_size
    trained = resolve_dims(dims, int(full))
    emb_config = EmbedderConfig.from_dict({**emb_config.to_dict(), "matryoshka_dims": list(trained)})
    return MatryoshkaInfoNCELoss(trained, cargs.temperature), emb_config
