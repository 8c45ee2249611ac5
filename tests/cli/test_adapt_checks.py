"""`vela adapt`'s checks: a bad --out or --student is refused before pseudo-labelling, a spent budget stops the
run, a run starts from an empty work directory, and a failed run leaves nothing."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from models.registry import ModelRegistry
from tests.cli.test_adapt import ingest

FLAGS = ["--max_minutes", "0.1", "--batch_size", "4", "--depth", "8", "--bf16", "false"]


@pytest.fixture(name="vela")
def vela_fixture(tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data directory with the collection `notes` of the tiny model (test_adapt_inputs.py uses it too)."""
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    return ingest(tmp_path, tiny_embedder_dir)


def no_pseudo_labelling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> None:
        raise AssertionError("pseudo-labelling started")

    monkeypatch.setattr("cli.adapt_queries.pseudo_queries", refuse)


def test_a_bad_student_is_refused_before_any_work(
    vela: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.reranker_fixtures import make_reranker

    ModelRegistry(vela / "models").register("rr1", make_reranker("bert", tmp_path / "rr1"))
    no_pseudo_labelling(monkeypatch)
    capsys.readouterr()
    cases = {
        "rr1": "--student: 'rr1' is a reranker, not an embedder",
        "nosuchmodel": "--student: 'nosuchmodel' is neither a registered model",
        str(tmp_path / "docs.jsonl"): "nor a model directory",
        "minilm-onnx": "cannot be trained",
    }
    for student, said in cases.items():
        assert main(["adapt", "notes", "--out", "t10a", "--student", student, "--data-dir", str(vela)]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err
    assert not (vela / "adapt").exists()
    assert "t10a" not in ModelRegistry(vela / "models").names()


def test_out_names_the_builtin_model(vela: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["adapt", "notes", "--out", "default", "--data-dir", str(vela)]) == 2
    assert (
        capsys.readouterr().err.strip() == "vela adapt: --out: 'default' is the built-in model's name: choose another"
    )


def test_a_spent_budget_stops_the_run_and_leaves_nothing(vela: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.adapt import adapt
    from cli.adapt_checks import BudgetSpent, training_minutes
    from training.adapt.arguments import AdaptArguments

    monkeypatch.setenv("VELA_DATA_DIR", str(vela))
    aargs = AdaptArguments(max_minutes=1e-4, batch_size=4, depth=8, bf16=False)  # pseudo-labelling takes longer
    with pytest.raises(BudgetSpent, match=r"nothing was trained or registered; run again with --max_minutes \d+"):
        adapt("notes", "spent", aargs, command="vela adapt notes --out spent")
    assert not (vela / "adapt").exists()
    assert "spent" not in ModelRegistry(vela / "models").names()
    # The product's budgets: 20 s kept for saving, at least 10 s of training.
    assert training_minutes(12.0, 60.0) == pytest.approx((720 - 60 - 20) / 60)
    with pytest.raises(BudgetSpent, match="took 55 s of the 1-minute budget"):
        training_minutes(1.0, 55.0)


def test_a_run_after_the_model_was_removed_starts_from_an_empty_work_dir(
    vela: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The earlier `a1`'s work directory holds a query encoder; a two-sided run of the same name names none and must
    register none."""
    stale = vela / "adapt" / "a1"
    (stale / "query_encoder").mkdir(parents=True)
    (stale / "query_encoder" / "config.json").write_text("{}")
    (stale / "checkpoint-3min").mkdir()
    capsys.readouterr()
    assert main(["adapt", "notes", "--out", "a1", "--tower", "both", "--data-dir", str(vela), *FLAGS]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    entry = ModelRegistry(vela / "models").get("a1")
    assert entry.path is not None and not (entry.path / "query_encoder").exists()
    assert printed["work_dir"] == str(stale) and sorted(p.name for p in (vela / "adapt").iterdir()) == ["a1"]
    assert not (stale / "query_encoder").exists() and not (stale / "checkpoint-3min").exists()


def test_an_interrupted_run_leaves_no_work_dir(
    vela: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: Any, out: Path, **__: Any) -> None:
        (out / "config.json").write_text("{}")  # partway through writing the model
        raise KeyboardInterrupt

    monkeypatch.setattr("training.adapt.trainer.train", interrupted)
    assert main(["adapt", "notes", "--out", "cut", "--tower", "both", "--data-dir", str(vela), *FLAGS]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "vela adapt: interrupted"
    assert list((vela / "adapt").iterdir()) == []
    assert "cut" not in ModelRegistry(vela / "models").names()


def test_the_console_keeps_faiss_start_up_chatter_and_library_bars_out(
    vela: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While adapt works, the faiss loader's INFO lines are off (its warnings are not) and so are the Hugging Face
    loading bars; both are as before once it is done."""
    from transformers.utils import logging as hf_logging

    import cli.adapt_queries

    seen: dict[str, bool] = {}
    real = cli.adapt_queries.pseudo_queries

    def probe(*a: Any) -> Any:
        logging.getLogger("faiss.loader").info("Loading faiss with AVX512 support.")
        logging.getLogger("faiss.loader").warning("a faiss warning")
        seen["bars"] = hf_logging.is_progress_bar_enabled()
        return real(*a)

    monkeypatch.setattr("cli.adapt_queries.pseudo_queries", probe)
    caplog.set_level(logging.INFO)  # as `vela adapt` sets the console
    bars_before = hf_logging.is_progress_bar_enabled()
    assert main(["adapt", "notes", "--out", "quiet", "--data-dir", str(vela), *FLAGS]) == 0
    faiss = [r for r in caplog.records if r.name == "faiss.loader"]
    assert [r.getMessage() for r in faiss] == ["a faiss warning"]
    assert seen == {"bars": False} and hf_logging.is_progress_bar_enabled() == bars_before
