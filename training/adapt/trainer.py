"""`vela adapt` training: the student embedder learns the hybrid teacher's pseudo-labels on the HF Trainer.

Loss = margin_mse_weight * margin-MSE(teacher margins) + infonce_weight * InfoNCE(in-batch + mined negatives).
The default is GPL's: margin-MSE alone, which copies how much better the teacher finds the positive than each
mined negative; that is where BM25's exact-term knowledge of the collection reaches the dense student. InfoNCE
(off by default: with it a short CPU run moved SciFact dense down, see docs/adapt.md) treats the pseudo-positive
as certainly relevant; without a teacher (`--teacher none`, the ablation) it is the whole loss, over the batch.

`build()` loads the student for training; `load()` reads a saved one back for inference (the service's loader).
Training stops at a wall-clock budget (training/time_budget.py) and can save checkpoints at given minutes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import (
    AutoModel,
    AutoTokenizer,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from models import EmbedderConfig, resolve_model_dir
from models.device import bf16_supported, resolve_device
from training.adapt.arguments import AdaptArguments
from training.adapt.collator import AdaptCollator
from training.adapt.dataset import Example, ExampleDataset
from training.contrastive.trainer import BiEncoder
from training.losses.infonce import InfoNCELoss
from training.losses.margin_mse import MarginMSELoss
from training.run_record import write_training_record
from training.time_budget import TimeBudgetCallback

log = logging.getLogger("vela.adapt")


def build(model: str) -> tuple[BiEncoder, Any, EmbedderConfig]:
    """The student to train: the collection's embedder (a name or a directory), its tokenizer and config."""
    root = resolve_model_dir(model)
    tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
    # One encoder for both sides: an asymmetric student (an earlier query-side adaptation) starts from its
    # document side and is saved as a plain model.
    config = dataclasses.replace(EmbedderConfig.from_dir(root), query_encoder="")
    return BiEncoder(AutoModel.from_pretrained(root, local_files_only=True), config), tokenizer, config


def load(path: str | Path) -> Any:
    """An adapted model for inference: a plain embedder directory, as the service loads it."""
    from models import load_embedder

    return load_embedder(str(path))


def save(model: BiEncoder, tokenizer: Any, config: EmbedderConfig, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.backbone.save_pretrained(out)
    tokenizer.save_pretrained(out)
    config.save(out)


class AdaptTrainer(Trainer):
    def __init__(self, *a: Any, infonce: InfoNCELoss, margin_mse: MarginMSELoss, aargs: AdaptArguments, **kw: Any):
        super().__init__(*a, **kw)
        self.infonce = infonce
        self.margin_mse = margin_mse
        self.aargs = aargs

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        q = nn.functional.normalize(model(**inputs["queries"]).float(), dim=-1)  # (B, d)
        d = nn.functional.normalize(model(**inputs["documents"]).float(), dim=-1)  # (B + B*H, d)
        b, h = q.shape[0], int(inputs["negatives"])
        # Without a teacher (no margins: the ablation) InfoNCE over the batch is the whole loss.
        w = self.aargs.infonce_weight if h and self.aargs.margin_mse_weight > 0 else 1.0
        loss = w * self.infonce.compute_loss_from_embeddings(q, d, inputs["exclude"]) if w else q.new_zeros(())
        if h and self.aargs.margin_mse_weight > 0:
            negs = d[b:].reshape(b, h, -1)  # (B, H, d): query-major, as the collator lays them out
            loss = loss + self.aargs.margin_mse_weight * self.margin_mse.compute_loss_from_embeddings(
                q, d[:b], negs, inputs["margins"]
            )
        return (loss, {"q": q, "d": d}) if return_outputs else loss


class CheckpointCallback(TrainerCallback):
    """Saves the student after given minutes of training (NDCG against minutes, without retraining)."""

    def __init__(self, minutes: list[float], save_to: Any) -> None:
        self.marks = sorted(m for m in minutes if m > 0)
        self.save_to = save_to  # (minutes) -> None
        self.started = 0.0
        self.saved: list[dict[str, float]] = []

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any) -> None:
        self.started = time.monotonic()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any) -> None:
        elapsed = (time.monotonic() - self.started) / 60.0
        while self.marks and elapsed >= self.marks[0]:
            mark = self.marks.pop(0)
            t = time.monotonic()
            self.save_to(mark)
            self.started += time.monotonic() - t  # saving is not training time
            self.saved.append({"minutes": mark, "step": state.global_step})


def device_and_bf16(args: AdaptArguments) -> tuple[str, bool]:
    """The device VELA_DEVICE names (`vela adapt` pinned `cuda:N` to CUDA_VISIBLE_DEVICES before anything touched
    CUDA) and whether to train in bf16: `--bf16` (on by default: about 3x faster on CPUs with AVX-512 bf16),
    kept off on a GPU without native bf16, where the HF Trainer would refuse it."""
    device = resolve_device(os.environ.get("VELA_DEVICE", "auto"))
    bf16 = args.bf16 and (device == "cpu" or bf16_supported(device))
    if args.bf16 and not bf16:
        log.warning("this GPU has no native bf16: training in fp32", extra={"device": device})
    return device, bf16


def training_arguments(args: AdaptArguments, out: Path, **extra: Any) -> TrainingArguments:
    """The HF Trainer's settings both recipes share: the time budget, not a step count, ends a run."""
    device, bf16 = device_and_bf16(args)
    return TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=args.batch_size,
        num_train_epochs=1000,  # the time budget ends training; each epoch draws new negatives
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        lr_scheduler_type="constant_with_warmup",  # the budget, not a step count, ends the run
        logging_steps=args.logging_steps,
        save_strategy="no",
        report_to="none",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        use_cpu=device == "cpu",
        bf16=bf16,
        seed=args.seed,
        disable_tqdm=True,
        **extra,
    )


def run_record(
    trainer: Trainer, args: AdaptArguments, examples: int, seconds: float, ckpt: CheckpointCallback
) -> dict[str, Any]:
    """What a run reports: steps, passes over the examples, losses, time and the checkpoints saved."""
    history = [h for h in trainer.state.log_history if "loss" in h]
    return {
        "examples": examples,
        "steps": trainer.state.global_step,
        "epochs": round(trainer.state.global_step * args.batch_size / max(1, examples), 2),
        "loss_first": history[0]["loss"] if history else None,
        "loss_last": history[-1]["loss"] if history else None,
        "log_history": history,
        "train_seconds": round(seconds, 1),
        "checkpoints": ckpt.saved,
    }


def train(examples: list[Example], args: AdaptArguments, *, model: str, out: Path, minutes: float) -> dict[str, Any]:
    """Train on the pseudo-labelled examples for at most `minutes`; save to `out` (+ checkpoints); the record."""
    from transformers import set_seed

    set_seed(args.seed)
    student, tokenizer, config = build(model)
    data = ExampleDataset(examples)
    collator = AdaptCollator(
        data, tokenizer, config, args.negatives, args.query_max_length, args.doc_max_length, seed=args.seed
    )
    targs = training_arguments(args, out)
    budget = TimeBudgetCallback(max(minutes, 1e-3))
    ckpt = CheckpointCallback(
        args.checkpoint_minutes, lambda m: save(student, tokenizer, config, out / f"checkpoint-{m:g}min")
    )
    trainer = AdaptTrainer(
        model=student,
        args=targs,
        train_dataset=data,
        data_collator=collator,
        callbacks=[budget, ckpt],
        infonce=InfoNCELoss(args.temperature),
        margin_mse=MarginMSELoss(args.student_scale),
        aargs=args,
    )
    t0 = time.time()
    trainer.train()
    seconds = time.time() - t0
    save(student, tokenizer, config, out)
    return run_record(trainer, args, len(examples), seconds, ckpt)


def write_record(out: Path, record: dict[str, Any]) -> None:
    """`training_args.json` beside the weights: what the registry shows under the model's training."""
    write_training_record(out, record)
