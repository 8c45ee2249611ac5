"""`vela train` arguments: checked before any work, bad ones exit 2 with one line; --out, --config and the batch
size flags mean one thing each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main as vela
from tests.tiny_models import write_topic_corpus
from training.cli_args import expand_config, parse_recipe_args
from training.condenser.arguments import CondenserArguments
from training.contrastive.arguments import ContrastiveArguments


@pytest.fixture
def pairs(tmp_path: Path) -> str:
    return f"mine:{write_topic_corpus(tmp_path / 'corpus')}"


def _contrastive(argv: list[str]) -> tuple[ContrastiveArguments, object]:
    return parse_recipe_args(ContrastiveArguments, argv, prog="vela train contrastive", resumable=True)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (["--max_stepz", "3"], "unrecognized arguments: --max_stepz"),
        (["--max_step", "3"], "unrecognized arguments: --max_step"),  # no abbreviations
        (["--batch_size", "0"], "batch_size must be >= 2"),
        (["--temperature", "0"], "temperature must be > 0"),
        (["--batch_size", "x"], "invalid int value"),
        (["--model", "no-such-model"], "--model 'no-such-model' is neither 'default' nor a local"),
        (["--per_device_train_batch_size", "6", "--batch_size", "4"], "disagree"),
        (["--resume_from_checkpoint", "true"], "no complete checkpoint-N folder"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_before_any_work(
    bad: list[str], says: str, pairs: str, tiny_embedder_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["train", "contrastive", "--out", str(out), "--surrogate", str(tiny_embedder_dir), "--pairs", pairs, *bad]
    with pytest.raises(SystemExit) as stop:
        vela(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vela train contrastive: error: ") and says in err and "\n" not in err
    assert not out.exists() and ("embedder" not in err if "--model" in bad else True)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--batch_size", "4"], "--pairs is required"),
        (["--pairs", "mine:/no/such/corpus"], "/no/such/corpus does not exist"),
        (["--pairs", "corpus.jsonl"], "use qrels:<beir dir>[:split] or mine:<beir dir|jsonl>"),
    ],
)
def test_pair_sources_are_checked_up_front(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        _contrastive(["--out", "o", *argv])
    assert stop.value.code == 2 and says in capsys.readouterr().err


def test_out_is_required_and_reads_in_every_form(pairs: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        _contrastive(["--pairs", pairs])
    assert stop.value.code == 2 and "--out DIR is required" in capsys.readouterr().err
    for form in (["--out=runs/eq"], ["--out", "runs/eq"], ["--output_dir", "runs/eq"]):
        assert _contrastive([*form, "--pairs", pairs])[1].output_dir == "runs/eq"  # type: ignore[attr-defined]


def test_help_shows_out_config_and_register(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        vela(["train", "contrastive", "--help"])
    shown = capsys.readouterr().out
    assert stop.value.code == 0 and "usage: vela train contrastive --out DIR [--config FILE] [--register NAME]" in shown
    options = shown.split("\n", 1)[1]  # past the usage line
    assert all(flag in options for flag in ("--out DIR", "--config FILE", "--register NAME"))


def test_the_hf_batch_flag_is_the_recipes_batch_size_and_is_recorded_as_used(pairs: str) -> None:
    recipe, targs = _contrastive(["--out", "o", "--pairs", pairs, "--per_device_train_batch_size", "6"])
    assert recipe.batch_size == 6 and targs.per_device_train_batch_size == 6  # type: ignore[attr-defined]
    recipe, targs = _contrastive(["--out", "o", "--pairs", pairs, "--batch_size", "5"])
    assert recipe.batch_size == 5 and targs.per_device_train_batch_size == 5  # type: ignore[attr-defined]


def test_checkpoints_are_saved_by_default_where_the_recipe_can_resume(pairs: str) -> None:
    targs: object
    _, targs = _contrastive(["--out", "o", "--pairs", pairs])
    assert (targs.save_strategy, targs.save_steps, targs.save_total_limit) == ("steps", 100, 1)  # type: ignore[attr-defined]
    _, targs = parse_recipe_args(CondenserArguments, ["--out", "o", "--corpus", "c"], prog="vela train condenser")
    assert targs.save_strategy == "no"  # type: ignore[attr-defined]


def test_a_parser_not_made_resumable_refuses_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        parse_recipe_args(
            CondenserArguments,
            ["--out", "o", "--corpus", "c", "--resume_from_checkpoint", "true"],
            prog="vela train condenser",
        )
    assert stop.value.code == 2 and "cannot resume a run yet" in capsys.readouterr().err


def test_a_malformed_config_file_is_one_line_naming_file_and_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_yaml = tmp_path / "recipe.yaml"
    bad_yaml.write_text("pairs: [qrels:sf:train\nbatch_size: 4\n")
    with pytest.raises(ValueError, match=r"recipe\.yaml: not valid YAML at line 2, column \d+: expected"):
        expand_config(["--config", str(bad_yaml)])
    bad_json = tmp_path / "recipe.json"
    bad_json.write_text('{"batch_size": 4,}')
    with pytest.raises(ValueError, match=r"recipe\.json: not valid JSON at line 1, column 18"):
        expand_config([f"--config={bad_json}"])
    assert vela(["train", "contrastive", "--out", "o", "--config", str(bad_yaml)]) == 1
    err = capsys.readouterr().err.strip()
    assert "recipe.yaml: not valid YAML at line 2" in err and "\n" not in err


def test_config_files_in_both_forms_and_the_command_line_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.yaml"
    first.write_text(json.dumps({"batch_size": 8, "epochs": 2}))
    second.write_text("batch_size: 16\nseed: 3\n")
    argv = expand_config(["--config", str(first), f"--config={second}", "--batch_size", "4"])
    assert argv == ["--batch_size", "8", "--epochs", "2", "--batch_size", "16", "--seed", "3", "--batch_size", "4"]
