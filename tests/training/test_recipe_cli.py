"""Every `vela train` recipe reads its command line alike: the reranker's `--help` shows `--out`, `--config` and
`--register`, and `--register` puts the trained reranker in the registry; revela reads `--method` from a config
file given in either form (it picks the training-loop defaults)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main as vela
from models.registry import ModelRegistry
from tests.reranker_fixtures import make_backbone
from training.revela.cli import _method


@pytest.mark.parametrize("name", ["condenser", "revela", "reranker"])
def test_help_shows_out_config_and_register(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        vela(["train", name, "--help"])
    shown = capsys.readouterr().out
    assert stop.value.code == 0 and f"usage: vela train {name} --out DIR [--config FILE] [--register NAME]" in shown
    options = shown.split("\n", 1)[1]  # past the usage line
    assert all(flag in options for flag in ("--out DIR", "--config FILE", "--register NAME"))


def test_train_reranker_register_puts_the_reranker_in_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VELA_MODELS_DIR", str(tmp_path / "models"))
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": f"d{i}", "text": f"doc {i}"}) for i in range(8)))
    (beir / "queries.jsonl").write_text("\n".join(json.dumps({"_id": f"q{j}", "text": f"doc {j}"}) for j in range(4)))
    (beir / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{j}\td{j}\t1\n" for j in range(4))
    )
    out = tmp_path / "out"
    argv = [
        "train", "reranker", "--out", str(out), "--register", "rr", "--data", str(beir),
        "--backbone", str(make_backbone("bert", tmp_path / "bert")), "--negatives", "2", "--bm25_depth", "4",
        "--max_length", "32", "--per_device_train_batch_size", "2", "--max_steps", "1", "--use_cpu", "true",
    ]  # fmt: skip
    monkeypatch.setattr("sys.argv", ["vela", *argv])
    assert vela(argv) == 0
    entry = ModelRegistry(tmp_path / "models").get("rr")
    assert entry.kind == "reranker" and entry.training is not None
    assert "--register" not in entry.training["command"]


def test_revela_reads_the_method_from_a_config_file_in_either_form(tmp_path: Path) -> None:
    config = tmp_path / "replug.yaml"
    config.write_text("method: replug\nbatch_size: 8\n")
    assert _method(["--out", "o", f"--config={config}"]) == "replug"
    assert _method(["--config", str(config), "--out", "o"]) == "replug"
    assert _method([f"--config={config}", "--method", "revela"]) == "revela"  # the command line wins
    assert _method(["--method=replug"]) == "replug" and _method(["--out", "o"]) == "revela"
