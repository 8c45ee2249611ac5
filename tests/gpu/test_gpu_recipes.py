"""One training step of every `vela train` recipe and of `vela adapt`, on the device VELA_TEST_RECIPE_DEVICE names.

Marker `gpu` (`make test-gpu`): by default the device is `cuda` and the module skips on hosts without CUDA. Each
test sets VELA_DEVICE to that device and leaves VELA_PRECISION at auto, so `vela train` adds the trainer flags
itself (training/cli_args.py `device_flags`); the record each recipe writes must then show one step, not on the
CPU, in bf16 where the GPU has it (compute capability >= 8). The same tests run on the CPU, tiny models throughout:

    VELA_TEST_RECIPE_DEVICE=cpu .venv/bin/pytest -q -m gpu tests/gpu/test_gpu_recipes.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from cli.main import RECIPES as TRAIN_RECIPES
from cli.main import main as vela
from tests.cli.test_adapt import ingest
from tests.tiny_models import write_topic_corpus
from tests.training.test_resume_recipes import _condenser, _reranker, _revela

DEVICE = os.environ.get("VELA_TEST_RECIPE_DEVICE", "cuda")
CUDA = DEVICE.startswith("cuda")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(CUDA and not torch.cuda.is_available(), reason=f"VELA_TEST_RECIPE_DEVICE={DEVICE}: no CUDA"),
]


def _bf16() -> bool:
    """What VELA_PRECISION=auto gives on DEVICE: bf16 on a CUDA device of compute capability 8.0 or newer."""
    return CUDA and torch.cuda.get_device_capability(0)[0] >= 8


def _pairs(root: Path, model: Path) -> list[str]:
    """The contrastive recipes' data: pairs mined from a 24-document corpus by the tiny model, 6 to a batch."""
    corpus = write_topic_corpus(root / "corpus")
    return [
        "--model", str(model), "--surrogate", str(model), "--pairs", f"mine:{corpus}", "--doc_max_length", "32",
        "--batch_size", "6",
    ]  # fmt: skip


# case -> (recipe, flags without --out given a work folder and the tiny embedder). REPLUG is a method of revela
# with a code path of its own (a frozen LM in bf16 when training in bf16).
CASES: dict[str, tuple[str, Callable[[Path, Path], list[str]]]] = {
    "contrastive": ("contrastive", _pairs),
    "cde": ("cde", lambda root, tiny: [*_pairs(root, tiny), "--corpus_context_size", "4"]),
    "moe": ("moe", lambda root, tiny: [*_pairs(root, tiny), "--num_experts", "4", "--moe_layers", "0"]),
    "condenser": ("condenser", lambda root, _: _condenser(root)),
    "revela": ("revela", lambda root, _: _revela(root)),
    "replug": ("revela", lambda root, _: [*_revela(root), "--method", "replug"]),
    "reranker": ("reranker", lambda root, _: _reranker(root)),
}


@pytest.fixture(autouse=True)
def _on_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VELA_DEVICE", DEVICE)
    monkeypatch.delenv("VELA_PRECISION", raising=False)  # auto: what the device supports


def test_every_train_recipe_has_a_case() -> None:
    assert {recipe for recipe, _ in CASES.values()} == set(TRAIN_RECIPES)


def _steps_and_args(out: Path) -> tuple[int, dict[str, Any]]:
    """(steps trained, TrainingArguments) from `training_args.json`. The reranker records its arguments under
    `training` and no step count: its last log entry has the step."""
    record = json.loads((out / "training_args.json").read_text())
    if "training" in record:
        return record["log_history"][-1]["step"], record["training"]
    return record["steps"], record["training_args"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_training_step(case: str, tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe, flags = CASES[case]
    out = tmp_path / "out"
    argv = ["train", recipe, "--out", str(out), *flags(tmp_path, tiny_embedder_dir), "--max_steps", "1"]
    monkeypatch.setattr("sys.argv", ["vela", *argv])
    assert vela(argv) == 0
    steps, targs = _steps_and_args(out)
    assert steps == 1
    assert targs["use_cpu"] == (not CUDA) and targs["bf16"] == _bf16()
    if recipe == "reranker":  # its own --precision flag, which `vela train` sets from VELA_PRECISION
        assert targs["precision"] == ("bf16" if _bf16() else "fp32")


@pytest.mark.parametrize("tower", ["query", "both"])
def test_one_adapt_step(tower: str, tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`vela adapt` ends at a time budget, not a step count: its TrainingArguments (training/adapt/trainer.py
    `training_arguments`, which both towers call) are given max_steps=1 here, and kept to be checked, for its
    record holds no TrainingArguments."""
    from training.adapt import trainer

    made: list[Any] = []
    original = trainer.training_arguments

    def one_step(args: Any, out: Path, **extra: Any) -> Any:
        made.append(original(args, out, **extra, max_steps=1))
        return made[-1]

    monkeypatch.setattr(trainer, "training_arguments", one_step)
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    data = tmp_path / "vela"
    monkeypatch.setenv("VELA_DATA_DIR", str(data))  # `vela adapt --data-dir` sets it; restored after the test
    ingest(tmp_path, tiny_embedder_dir)
    argv = ["adapt", "notes", "--out", "adapted", "--data-dir", str(data), "--tower", tower, "--batch_size", "4"]
    assert vela([*argv, "--depth", "8", "--max_minutes", "1"]) == 0
    record = json.loads((data / "adapt" / "adapted" / "training_args.json").read_text())
    assert record["steps"] == 1 and len(made) == 1
    assert made[0].use_cpu == (not CUDA)
    if CUDA:  # adapt takes bf16 from its own --bf16 (default true), not from VELA_PRECISION
        assert made[0].bf16 == _bf16()
