"""An interrupted `vela train contrastive` goes on from its last checkpoint and ends where an uninterrupted run
ends; an interrupt before anything was saved leaves no `--out` folder; a finished run drops our checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from cli.main import main as vela
from tests.tiny_models import write_topic_corpus
from training.checkpoints import latest_checkpoint
from training.contrastive.trainer import ContrastiveTrainer


class StepCounter(ContrastiveTrainer):
    """The recipe's trainer, counting the steps this process trains and interrupted before step `stop_at`."""

    stop_at = 0
    steps_run = 0

    def training_step(self, *a: Any, **kw: Any) -> torch.Tensor:
        if self.state.global_step + 1 == type(self).stop_at:
            raise KeyboardInterrupt
        type(self).steps_run += 1
        return super().training_step(*a, **kw)


def _train(argv: list[str], monkeypatch: pytest.MonkeyPatch, *, stop_at: int = 0) -> tuple[int, int]:
    """`vela train contrastive ARGV` with the counting trainer: (exit status, steps it trained)."""
    monkeypatch.setattr("training.contrastive.trainer.ContrastiveTrainer", StepCounter)
    monkeypatch.setattr(StepCounter, "stop_at", stop_at)
    monkeypatch.setattr(StepCounter, "steps_run", 0)
    monkeypatch.setattr("sys.argv", ["vela", "train", "contrastive", *argv])
    return vela(["train", "contrastive", *argv]), StepCounter.steps_run


@pytest.fixture
def recipe(tmp_path: Path, tiny_embedder_dir: Path) -> list[str]:
    """48 mined pairs in batches of 4: 12 steps."""
    corpus = write_topic_corpus(tmp_path / "corpus")
    return [
        "--model", str(tiny_embedder_dir), "--surrogate", str(tiny_embedder_dir), "--pairs", f"mine:{corpus}",
        "--batch_size", "4", "--doc_max_length", "32", "--logging_steps", "1", "--seed", "0",
    ]  # fmt: skip


def test_an_interrupted_run_resumes_from_its_checkpoint_and_ends_as_an_uninterrupted_one(
    recipe: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert _train(["--out", str(whole), *recipe], monkeypatch) == (0, 12)
    assert latest_checkpoint(whole) is None  # the default checkpoints go once the model is saved

    every_3 = ["--out", str(cut), *recipe, "--save_steps", "3", "--save_total_limit", "0"]
    assert _train(every_3, monkeypatch, stop_at=8) == (130, 7)  # interrupted
    assert sorted(p.name for p in cut.iterdir()) == ["checkpoint-3", "checkpoint-6"]  # kept: something to resume

    assert _train([*every_3, "--resume_from_checkpoint", "true"], monkeypatch) == (0, 6)  # steps 7..12 only
    record = json.loads((cut / "training_args.json").read_text())
    assert record["steps"] == 12 and record["training_args"]["resume_from_checkpoint"] == str(cut / "checkpoint-6")
    before, after = load_file(whole / "model.safetensors"), load_file(cut / "model.safetensors")
    assert before.keys() == after.keys()
    assert all(torch.allclose(before[k], after[k], atol=1e-6) for k in before)


def test_a_checkpoint_of_another_plan_is_refused_and_leaves_no_folder(
    recipe: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "first"
    assert _train(["--out", str(first), *recipe, "--save_steps", "5"], monkeypatch) == (0, 12)
    assert latest_checkpoint(first) == first / "checkpoint-12"  # asked for: kept (the last one)
    other = tmp_path / "other"
    resume = ["--resume_from_checkpoint", str(first / "checkpoint-12")]
    assert _train(["--out", str(other), *recipe, "--batch_size", "6", *resume], monkeypatch) == (1, 0)
    assert "belongs to a run of 12 steps but these arguments make 8" in capsys.readouterr().err
    assert not other.exists()


def test_an_interrupt_before_any_checkpoint_leaves_no_out_folder(
    recipe: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert _train(["--out", str(out), *recipe], monkeypatch, stop_at=2) == (130, 1)
    assert not out.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    assert _train(["--out", str(kept), *recipe], monkeypatch, stop_at=2) == (130, 1)
    assert kept.is_dir()  # a folder the user made stays
