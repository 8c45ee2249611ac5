"""What `vela models` counts as a model, alike in add, list and remove, and how it words a name it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main as vela
from cli.models import check_register_name
from models.registry import ModelRegistry


@pytest.fixture()
def registry_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VELA_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("VELA_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "models"


def _hollow(root: Path) -> Path:
    """A folder with a config.json and no weights."""
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 16}))
    return root


def test_remove_leaves_folders_that_are_not_models(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pointed at a data directory by mistake, remove does not take its collections, nor anything but a model."""
    data = tmp_path / "data"
    (data / "collections" / "notes").mkdir(parents=True)
    (data / "collections" / "notes" / "collection.json").write_text("{}")
    _hollow(data / "hollow")
    (data / "outside").symlink_to(tiny_embedder_dir, target_is_directory=True)
    for name, why in [
        ("collections", "'collections' is not a model (no config.json"),
        ("hollow", "'hollow' is not a model (no weights"),
        ("outside", "no registered model named 'outside'"),
        ("default", "'default' is built in"),
    ]:
        assert vela(["models", "--models-dir", str(data), "remove", name]) == 2, name
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1, err
    assert (data / "collections" / "notes" / "collection.json").is_file() and (data / "hollow").is_dir()
    assert (data / "outside").is_symlink()
    assert ModelRegistry(data).names() == ["collections", "hollow"]  # folders, no entry of a listing


def test_list_and_add_judge_a_folder_without_weights_alike(
    registry_dir: Path, tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hollow = _hollow(tmp_path / "hollow")
    assert vela(["models", "add", "hollow", str(hollow)]) == 2
    assert "no weights" in capsys.readouterr().err
    _hollow(registry_dir / "by-hand")  # put there by hand: no model, so not listed
    assert vela(["models", "add", "tiny", str(tiny_embedder_dir)]) == 0
    capsys.readouterr()
    assert vela(["models", "list", "--json"]) == 0
    assert [m["name"] for m in json.loads(capsys.readouterr().out)] == ["default", "tiny"]
    assert vela(["models", "list"]) == 0
    assert "by-hand" not in capsys.readouterr().out


@pytest.mark.parametrize("name", ["default", "minilm", "minilm-onnx", "all-MiniLM-L6-v2"])
def test_a_built_in_name_is_refused_as_taken_not_as_malformed(
    registry_dir: Path, tiny_embedder_dir: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check_register_name(name) == f"--register: {name!r} is the built-in model's name: choose another"
    assert check_register_name(name, flag="--out") == f"--out: {name!r} is the built-in model's name: choose another"
    assert vela(["models", "add", name, str(tiny_embedder_dir)]) == 2
    assert f"{name!r} is the built-in model's name: choose another" in capsys.readouterr().err


def test_register_name_refusals(registry_dir: Path, tiny_embedder_dir: Path) -> None:
    assert "not starting with '.'; got '../bad'" in (check_register_name("../bad") or "")
    assert check_register_name("fine") is None
    ModelRegistry(registry_dir).register("taken", tiny_embedder_dir)
    assert check_register_name("taken") == "--register: a model named 'taken' is registered already"
