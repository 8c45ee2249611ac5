"""`vela train` refuses, before any model or data loads, every argument that could be judged up front and used to
train anyway, fail late, or fail with a traceback: non-finite floats, values out of range, lengths past the model's
position table, a backbone the recipe cannot build on, missing data and an --out that cannot be written."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cli.main import main as vela
from tests.cli.beir_data import write_beir
from tests.tiny_models import save_tiny_bert
from training.adapt.arguments import AdaptArguments
from training.cli_args import parse_recipe_args
from training.console import log_to_console
from training.contrastive.arguments import ContrastiveArguments
from training.moe.arguments import MoeArguments


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny BERT (32 dims, 128 positions; 1 and 2 layers), a BEIR folder with only a test split, and the
    config.json of a small causal LM (nothing reads its weights before the checks)."""
    root = tmp_path_factory.mktemp("parts")
    lm = root / "lm"
    lm.mkdir()
    (lm / "config.json").write_text(json.dumps({"model_type": "llama", "max_position_embeddings": 64}))
    return {
        "bert": save_tiny_bert(root / "bert", layers=2),
        "bert1": save_tiny_bert(root / "bert1", layers=1),
        "beir": write_beir(root / "beir"),
        "lm": lm,
    }


def _refused(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit status 2 and one line on stderr naming the problem; nothing made at --out."""
    out = Path(argv[argv.index("--out") + 1])
    existed = out.exists()
    with pytest.raises(SystemExit) as stop:
        vela(argv)
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2, err
    assert says in err and "\n" not in err and "Traceback" not in err, err
    assert out.exists() == existed


def _argv(recipe: str, parts: dict[str, Path], out: Path, *extra: str) -> list[str]:
    bert, beir = str(parts["bert"]), str(parts["beir"])
    base = {
        "contrastive": ["--model", bert, "--pairs", f"qrels:{beir}:test"],
        "moe": ["--model", bert, "--pairs", f"qrels:{beir}:test"],
        "reranker": ["--backbone", bert, "--data", beir, "--split", "test", "--max_length", "64"],
        "condenser": ["--model", bert, "--corpus", beir],
        "revela": ["--lm", str(parts["lm"]), "--model", bert, "--corpus", beir],
    }[recipe]
    return ["train", recipe, "--out", str(out), *base, *extra]


@pytest.mark.parametrize(
    ("recipe", "bad", "says"),
    [
        # NaN passes `x <= 0`; every float flag, the recipes' and HF's, is refused when not finite.
        ("contrastive", ["--temperature", "nan"], "--temperature must be a finite number"),
        ("contrastive", ["--learning_rate", "nan"], "--learning_rate must be a finite number"),
        ("contrastive", ["--fn_margin", "inf"], "--fn_margin must be a finite number"),
        ("condenser", ["--backbone_mlm_weight", "nan"], "--backbone_mlm_weight must be a finite number"),
        ("reranker", ["--head_dropout", "nan"], "--head_dropout must be a finite number"),
        ("revela", ["--max_minutes", "nan"], "--max_minutes must be a finite number"),
        ("revela", ["--max_minutes", "0"], "max_minutes must be > 0"),
        ("revela", ["--max_minutes", "-1"], "max_minutes must be > 0"),
        ("contrastive", ["--learning_rate=-1e-5"], "--learning_rate must be > 0"),
        ("contrastive", ["--max_steps", "0"], "--max_steps must be >= 1"),
        ("moe", ["--router_aux_loss_coef", "-1"], "router_aux_loss_coef must be >= 0"),
        ("reranker", ["--lora_dropout", "1.5"], "lora_dropout must be in [0, 1)"),
        # The models' own validators, run up front: raised by the config, they escaped as a traceback.
        ("reranker", ["--max_length", "0"], "max_length must be in [8, 32768]"),
        ("reranker", ["--head_dropout", "2"], "head_dropout must be in [0, 1)"),
        ("condenser", ["--early_layers", "5"], "early_layers must be in [1, 1]"),
        ("condenser", ["--head_layers", "0"], "head_layers must be >= 1"),
        # Lengths past the position table (128) failed with an index error mid-training.
        ("contrastive", ["--doc_max_length", "512"], "--doc_max_length 512 is more than --model's 128 positions"),
        ("contrastive", ["--query_max_length", "129"], "--query_max_length 129 is more than --model's 128"),
        ("reranker", ["--max_length", "256"], "--max_length 256 is more than --backbone's 128 positions"),
        ("condenser", ["--max_length", "256"], "--max_length 256 is more than --model's 128 positions"),
        ("revela", ["--lm_max_length", "100"], "--lm_max_length 100 is more than --lm's 64 positions"),
        # Data and teachers that failed only after the models had loaded.
        ("reranker", ["--split", "nosplit"], "has no qrels/nosplit.tsv"),
        ("reranker", ["--data", "/no/such/beir"], "'/no/such/beir' has no corpus.jsonl"),
        ("moe", ["--teacher", "nope"], "--teacher 'nope' is neither 'default' nor a local"),
        ("moe", ["--matryoshka_dims", "64"], "--matryoshka_dims 64: each dim must be in [1, the model's 32"),
        ("contrastive", ["--matryoshka_dims", "0"], "--matryoshka_dims 0: each dim must be in [1,"),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2_before_any_work(
    recipe: str, bad: list[str], says: str, parts: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _refused(_argv(recipe, parts, tmp_path / "out", *bad), says, capsys)


def test_qrels_pairs_need_their_split(
    parts: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The default split is train; the folder has only test.
    argv = ["train", "contrastive", "--out", str(tmp_path / "o"), "--model", str(parts["bert"])]
    _refused([*argv, "--pairs", f"qrels:{parts['beir']}"], "has no qrels/train.tsv", capsys)


def test_a_one_layer_backbone_is_no_condenser(
    parts: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "condenser", "--out", str(tmp_path / "o"), "--model", str(parts["bert1"])]
    _refused([*argv, "--corpus", str(parts["beir"])], "a Condenser needs a backbone of at least 2 layers", capsys)


def test_revela_refuses_an_encoder_as_its_lm(
    parts: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A BERT loads as an LM and trains, then fails to save: refused from its config.json instead.
    argv = ["train", "revela", "--out", str(tmp_path / "o"), "--lm", str(parts["bert"]), "--corpus", str(parts["beir"])]
    _refused(argv, f"--lm {str(parts['bert'])!r} is a bert, not a causal LM", capsys)


def test_out_must_be_a_folder_that_can_be_made(
    parts: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    _refused(_argv("contrastive", parts, a_file), "is a file, not a folder", capsys)
    _refused(_argv("contrastive", parts, a_file / "under"), "is a file, so no folder can be made under it", capsys)
    assert a_file.read_text() == "x"


def test_defaults_past_a_small_model_fit_it(parts: dict[str, Path]) -> None:
    """The default lengths (192 tokens) and Matryoshka dim (256) come down to a 128-position, 32-dim model, so
    small models still train with the defaults; only a value given past the limit is refused."""
    argv = ["--out", "o", "--model", str(parts["bert"]), "--pairs", f"qrels:{parts['beir']}:test"]
    cargs, _ = parse_recipe_args(MoeArguments, argv, prog="vela train moe")
    assert (cargs.doc_max_length, cargs.query_max_length, cargs.matryoshka_dims) == (128, 64, [32])
    cargs, _ = parse_recipe_args(MoeArguments, [*argv, "--matryoshka_dims", "0"], prog="vela train moe")
    assert cargs.matryoshka_dims == []  # moe's documented "0: none"
    cargs, _ = parse_recipe_args(ContrastiveArguments, [*argv, "--matryoshka_dims", "16", "32"], prog="vela train c")
    assert cargs.matryoshka_dims == [16, 32]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("checkpoint_minutes", [5.0, -1.0], "checkpoint_minutes must each be > 0"),
        ("max_minutes", float("nan"), "--max_minutes must be a finite number"),
        ("temperature", float("nan"), "--temperature must be a finite number"),
    ],
)
def test_adapt_arguments_refuse_nan_and_negative_minutes(field: str, value: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        AdaptArguments(**{field: value})  # type: ignore[arg-type]


def test_faiss_loader_lines_stay_off_the_training_console() -> None:
    # faiss logs each CPU build it could not load at INFO; the recipes log at INFO themselves.
    log_to_console()
    assert not logging.getLogger("faiss.loader").isEnabledFor(logging.INFO)
    assert logging.getLogger("faiss.loader").isEnabledFor(logging.WARNING)
