"""`vela train condenser|revela|reranker` resume as contrastive does (test_train_resume.py): an interrupted run goes
on from its last checkpoint, trains the remaining steps only and ends with the weights of an uninterrupted run;
checkpoints made by default go once the model is saved; a run stopped before saving anything leaves no `--out`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from transformers import Trainer

from cli.main import main as vela
from models import EmbedderConfig
from tests.cli.beir_data import write_beir
from tests.reranker_fixtures import make_backbone
from tests.tiny_models import save_tiny_bert
from tests.training.test_revela import _documents, _write_jsonl, save_tiny_llama
from training.checkpoints import CHECKPOINT_DEFAULTS, latest_checkpoint

TOPICS = ["cats", "dogs", "paris", "berlin", "plants", "telescopes", "volcanoes", "jazz", "chess", "coffee"]


def _condenser(root: Path) -> list[str]:
    """54 training passages in batches of 8, two epochs: 14 steps."""
    words = ["insulin", "glucose", "blood", "cell", "study", "found", "levels", "patients", "trial", "dose"]
    docs = [{"_id": str(i), "title": "", "text": " ".join(words[(i + j) % 10] for j in range(40))} for i in range(60)]
    corpus = _write_jsonl(root / "corpus.jsonl", docs)
    return [
        "--model", str(save_tiny_bert(root / "bert", layers=2)), "--corpus", str(corpus), "--max_length", "32",
        "--per_device_train_batch_size", "8", "--eval_fraction", "0.1", "--learning_rate", "3e-3",
    ]  # fmt: skip


def _revela(root: Path) -> list[str]:
    """7 batches of 4 chunks, two epochs: 14 steps, LoRA on retriever and LM."""
    bert = save_tiny_bert(root / "bert", layers=2, embedder=EmbedderConfig(pooling="mean", max_length=64))
    corpus = _write_jsonl(root / "corpus.jsonl", _documents(8, sentences=10))
    return [
        "--model", str(bert), "--lm", str(save_tiny_llama(root / "llama")), "--corpus", str(corpus),
        "--batch_size", "4", "--chunk_words", "30", "--lora_r", "4", "--lm_lora_r", "4", "--max_length", "48",
        "--lm_max_length", "40",
    ]  # fmt: skip


def _reranker(root: Path) -> list[str]:
    """10 queries, 2 a step, two epochs: 10 steps."""
    beir = root / "beir"
    (beir / "qrels").mkdir(parents=True)
    docs = [
        {"_id": f"d{i}", "title": TOPICS[i % 10], "text": f"Document {i} is about {TOPICS[i % 10]}."} for i in range(60)
    ]
    _write_jsonl(beir / "corpus.jsonl", docs)
    _write_jsonl(beir / "queries.jsonl", [{"_id": f"q{j}", "text": f"facts about {t}"} for j, t in enumerate(TOPICS)])
    (beir / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{j}\td{j}\t1\n" for j in range(10))
    )
    return [
        "--data", str(beir), "--backbone", str(make_backbone("bert", root / "backbone")), "--max_length", "48",
        "--negatives", "3", "--per_device_train_batch_size", "2",
    ]  # fmt: skip


RECIPES: dict[str, tuple[Callable[[Path], list[str]], int]] = {
    "condenser": (_condenser, 14),
    "revela": (_revela, 14),
    "reranker": (_reranker, 10),
}
COMMON = ["--num_train_epochs", "2", "--warmup_steps", "0", "--logging_steps", "1", "--seed", "0", "--use_cpu", "true"]


@pytest.fixture(scope="module", params=sorted(RECIPES))
def recipe(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str], int]:
    """(name, flags without --out, steps of a whole run)."""
    name = request.param
    make, steps = RECIPES[name]
    return name, [*make(tmp_path_factory.mktemp(name)), *COMMON], steps


class Steps:
    """Counts the training steps a run takes in this process, and interrupts it before step `stop_at`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.stop_at = self.run = 0
        original = Trainer.training_step

        def training_step(trainer: Trainer, *a: Any, **kw: Any) -> torch.Tensor:
            if trainer.state.global_step + 1 == self.stop_at:
                raise KeyboardInterrupt
            self.run += 1
            return original(trainer, *a, **kw)

        monkeypatch.setattr(Trainer, "training_step", training_step)
        self.monkeypatch = monkeypatch

    def train(self, name: str, argv: list[str], *, stop_at: int = 0) -> tuple[int, int]:
        """`vela train NAME ARGV`: (exit status, steps it trained)."""
        self.stop_at, self.run = stop_at, 0
        self.monkeypatch.setattr("sys.argv", ["vela", "train", name, *argv])
        return vela(["train", name, *argv]), self.run


@contextmanager
def _warnings(logger: str) -> Iterator[list[str]]:
    """The warnings `logger` logs meanwhile (transformers' loggers do not propagate to pytest's caplog)."""
    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger(logger).addHandler(handler)
    try:
        yield seen
    finally:
        logging.getLogger(logger).removeHandler(handler)


def _record(out: Path) -> dict[str, Any]:
    record = json.loads((out / "training_args.json").read_text())
    return dict(record.get("training") or record["training_args"])  # the reranker's layout, the others'


def _losses(out: Path) -> dict[int, float]:
    """The training loss logged at each step (a resumed run: the checkpoint's history, then its own steps)."""
    history = json.loads((out / "training_args.json").read_text())["log_history"]
    return {h["step"]: h["loss"] for h in history if "loss" in h}


def test_an_interrupted_run_resumes_from_its_checkpoint_and_ends_as_an_uninterrupted_one(
    recipe: tuple[str, list[str], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, flags, total = recipe
    steps = Steps(monkeypatch)
    monkeypatch.setitem(CHECKPOINT_DEFAULTS, "save_steps", 4)  # the default checkpoints, within a short run
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert steps.train(name, ["--out", str(whole), *flags]) == (0, total)
    assert latest_checkpoint(whole) is None  # the default checkpoints go once the model is saved

    every_3 = ["--out", str(cut), *flags, "--save_steps", "3", "--save_total_limit", "0"]
    stop = total // 2 + 3  # past the first epoch: the resumed run starts inside the second
    assert steps.train(name, every_3, stop_at=stop) == (130, stop - 1)  # interrupted
    saved = 3 * ((stop - 1) // 3)
    assert latest_checkpoint(cut) == cut / f"checkpoint-{saved}"

    with _warnings("transformers") as warned:
        assert steps.train(name, [*every_3, "--resume_from_checkpoint", "true"]) == (0, total - saved)  # the rest
    assert not [w for w in warned if "keys in the checkpoint" in w]  # every weight came back, none left over
    assert _record(cut)["resume_from_checkpoint"] == str(cut / f"checkpoint-{saved}")
    assert latest_checkpoint(cut) == cut / f"checkpoint-{total}"  # asked for: kept
    assert _losses(cut) == pytest.approx(_losses(whole), abs=1e-5)  # the resumed steps saw the same batches
    before, after = load_file(whole / "model.safetensors"), load_file(cut / "model.safetensors")
    assert before.keys() == after.keys()
    assert all(torch.allclose(before[k], after[k], atol=1e-6) for k in before)

    other = tmp_path / "other"  # a checkpoint of a run of another length is refused, and leaves no folder
    resume = ["--resume_from_checkpoint", str(cut / f"checkpoint-{saved}")]
    assert steps.train(name, ["--out", str(other), *flags, "--num_train_epochs", "1", *resume]) == (1, 0)
    assert f"belongs to a run of {total} steps but these arguments make {total // 2}" in capsys.readouterr().err
    assert not other.exists()


def test_an_interrupt_before_any_checkpoint_leaves_no_out_folder(
    recipe: tuple[str, list[str], int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, flags, _ = recipe
    steps = Steps(monkeypatch)
    out = tmp_path / "out"
    assert steps.train(name, ["--out", str(out), *flags], stop_at=2) == (130, 1)
    assert not out.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    assert steps.train(name, ["--out", str(kept), *flags], stop_at=2) == (130, 1)
    assert kept.is_dir()  # a folder the user made stays


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_resume_with_nothing_to_resume_exits_2_with_one_line(
    name: str, tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    lm = tmp_path / "lm"  # revela reads only the LM's config.json before the resume check (a causal LM)
    lm.mkdir()
    (lm / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 512}))
    beir = write_beir(tmp_path / "beir")  # the reranker's --data must hold its split's files
    required = {
        "condenser": ["--corpus", "c"],
        "revela": ["--lm", str(lm), "--corpus", "c"],
        "reranker": ["--data", str(beir), "--split", "test"],
    }
    argv = ["train", name, "--out", str(out), *required.get(name, ["--data", "d"]), "--resume_from_checkpoint", "true"]
    with pytest.raises(SystemExit) as stop:
        vela(argv)
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err
    assert err.startswith(f"vela train {name}: error: --resume_from_checkpoint true: no complete checkpoint-N")
    assert not out.exists()
