"""`vela models add|list|remove|add-eval` and `vela train ... --register NAME` on real model directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main as vela
from cli.models import output_dir, take_register_flag
from models.registry import ModelRegistry
from tests.tiny_models import write_topic_corpus


def test_add_list_add_eval_and_remove(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("VELA_DATA_DIR", str(data))  # the registry is then <data dir>/models
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    assert vela(["models", "add", "tiny", str(tiny_embedder_dir)]) == 0
    added = json.loads(capsys.readouterr().out)
    assert (added["name"], added["kind"], added["dims"]) == ("tiny", "embedder", 32)
    assert Path(added["path"]) == (data / "models" / "tiny").resolve()
    assert vela(["models", "add", "tiny", str(tiny_embedder_dir)]) == 2  # taken
    assert "registered already" in capsys.readouterr().err
    assert vela(["models", "add", "../up", str(tiny_embedder_dir)]) == 2
    capsys.readouterr()

    result = tmp_path / "scifact.json"
    result.write_text(json.dumps({"results": {"hybrid": {"ndcg@10": 0.61}}}))
    assert vela(["models", "add-eval", "tiny", str(result)]) == 0
    capsys.readouterr()
    assert vela(["models", "list", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert set(listed) == {"default", "tiny"} and listed["tiny"]["source"] == str(tiny_embedder_dir.resolve())
    assert listed["tiny"]["evals"][0]["result"] == {"results": {"hybrid": {"ndcg@10": 0.61}}}
    assert vela(["models", "list"]) == 0
    assert "tiny" in capsys.readouterr().out

    # A collection that uses the model keeps it, unless forced.
    (data / "collections" / "notes").mkdir(parents=True)
    entry = str((data / "models" / "tiny").resolve())
    (data / "collections" / "notes" / "collection.json").write_text(json.dumps({"embedder": entry}))
    assert vela(["models", "remove", "tiny"]) == 2
    assert "collection 'notes' uses 'tiny'" in capsys.readouterr().err
    assert vela(["models", "remove", "tiny", "--force"]) == 0
    assert ModelRegistry(data / "models").names() == []
    assert vela(["models", "remove", "tiny"]) == 2


def test_register_flag_parsing(tmp_path: Path) -> None:
    assert take_register_flag(["--out", "o", "--register", "m", "--x", "1"]) == (["--out", "o", "--x", "1"], "m")
    assert take_register_flag(["--register=m", "--out=o"]) == (["--out=o"], "m")
    assert take_register_flag(["--out", "o"]) == (["--out", "o"], None)
    with pytest.raises(ValueError):
        take_register_flag(["--register"])
    assert output_dir(["--out", "o", "--lr", "1"]) == Path("o")
    assert output_dir(["--output_dir", "p"]) == Path("p")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"out": "from-config"}))
    assert output_dir(["--config", str(config)]) == Path("from-config")


def test_train_register_puts_the_trained_model_in_the_registry(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VELA_MODELS_DIR", str(tmp_path / "models"))
    corpus = write_topic_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    argv = [
        "train", "contrastive", "--out", str(out), "--register", "tuned", "--model", str(tiny_embedder_dir),
        "--surrogate", str(tiny_embedder_dir), "--pairs", f"mine:{corpus}", "--doc_max_length", "32",
        "--batch_size", "6", "--max_steps", "1",
    ]  # fmt: skip
    assert vela(["train", "contrastive", "--out", str(out), "--register", "../bad"]) == 2  # refused before training
    monkeypatch.setattr("sys.argv", ["vela", *argv])
    assert vela(argv) == 0
    entry = ModelRegistry(tmp_path / "models").get("tuned")
    assert entry.kind == "embedder" and entry.dims == 32
    assert entry.training is not None and "--register" not in entry.training["command"]
    assert entry.training["steps"] == 1


def test_train_starts_from_a_registered_model_by_name(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VELA_MODELS_DIR", str(tmp_path / "models"))
    ModelRegistry(tmp_path / "models").register("tiny", tiny_embedder_dir)
    corpus = write_topic_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    argv = [
        "train", "contrastive", "--out", str(out), "--model", "tiny", "--surrogate=tiny",
        "--pairs", f"mine:{corpus}", "--doc_max_length", "32", "--batch_size", "6", "--max_steps", "1",
    ]  # fmt: skip
    monkeypatch.setattr("sys.argv", ["vela", *argv])
    monkeypatch.chdir(tmp_path)  # no folder named "tiny" here: the name is the registry's
    assert vela(argv) == 0
    record = json.loads((out / "training_args.json").read_text())
    assert "--model tiny" in record["command"]  # the command as typed, the name kept
