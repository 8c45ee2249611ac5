"""`vela models remove` keeps a model that any kept generation of a collection embeds with (serving, rollback
target, being built), in the data directory `--data-dir` names; the registry defaults to `<data dir>/models`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main as vela
from indexing import generations as gens
from models.registry import ModelRegistry


@pytest.fixture()
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No data directory but the one the commands name: VELA_DATA_DIR points at an empty folder, ./.vela is absent."""
    monkeypatch.setenv("VELA_DATA_DIR", str(tmp_path / "not-this-one"))
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "data"


def test_remove_is_refused_while_any_kept_generation_uses_the_model(
    elsewhere: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = elsewhere
    corpus = data.parent / "docs.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"tides and the moon {i}"}) for i in range(4)))
    ingest = ["ingest", "--data", str(corpus), "--collection", "small", "--data-dir", str(data)]
    assert vela([*ingest, "--embedder", str(tiny_embedder_dir)]) == 0
    assert vela(["models", "--data-dir", str(data), "add", "m1", str(tiny_embedder_dir)]) == 0
    assert (data / "models" / "m1" / "config.json").is_file()  # the registry is <data dir>/models
    reindex = ["reindex", "small", "--data-dir", str(data)]
    root = data / "collections" / "small"
    capsys.readouterr()

    def refused(stage: str) -> None:
        assert vela(["models", "remove", "m1", "--data-dir", str(data)]) == 2, stage
        err = capsys.readouterr().err
        assert "collection 'small' uses 'm1'" in err and "reindex it to another model" in err, stage
        assert ModelRegistry(data / "models").names() == ["m1"], stage

    assert vela([*reindex, "--embedder", "m1", "--promote", "manual"]) == 0
    assert gens.read_pointer(root).building is not None
    refused("building")
    assert vela([*reindex, "--promote-ready"]) == 0
    assert gens.read_pointer(root).current != 0
    refused("serving")
    assert vela([*reindex, "--rollback"]) == 0
    assert gens.read_pointer(root).current == 0 and gens.read_pointer(root).previous is not None
    refused("rollback target")

    # An unused model goes, though collections exist; the used one goes when forced.
    assert vela(["models", "--data-dir", str(data), "add", "m2", str(tiny_embedder_dir)]) == 0
    assert vela(["models", "--data-dir", str(data), "remove", "m2"]) == 0
    assert vela(["models", "--data-dir", str(data), "remove", "m1", "--force"]) == 0
    assert "removed m1" in capsys.readouterr().out
    assert ModelRegistry(data / "models").names() == []


def test_a_generation_the_pointer_no_longer_names_does_not_keep_a_model(
    elsewhere: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Generation 0's collection.json outlives its data (it is the collection's record on disk): once neither
    serving nor kept, the model it names may go."""
    data = elsewhere
    entry = ModelRegistry(data / "models").register("old", tiny_embedder_dir)
    root = data / "collections" / "c"
    (root / gens.GEN_DIR / "2").mkdir(parents=True)
    (root / "collection.json").write_text(json.dumps({"embedder": str(entry.path)}))
    (root / gens.GEN_DIR / "2" / "collection.json").write_text(json.dumps({"embedder": str(tiny_embedder_dir)}))
    (root / gens.POINTER).write_text(json.dumps({"current": 2, "last": 2}))
    assert vela(["models", "remove", "old", "--data-dir", str(data)]) == 0
    capsys.readouterr()


def test_the_registry_follows_the_data_dir_unless_models_dir_or_vela_models_dir_say(
    elsewhere: Path, tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = elsewhere
    assert vela(["models", "add", "a", str(tiny_embedder_dir), "--data-dir", str(data)]) == 0
    assert ModelRegistry(data / "models").names() == ["a"]
    assert vela(["models", "--data-dir", str(data), "add", "b", str(tiny_embedder_dir), "--models-dir", "own"]) == 0
    assert ModelRegistry(tmp_path / "own").names() == ["b"]
    monkeypatch.setenv("VELA_MODELS_DIR", str(tmp_path / "env"))  # as the API: VELA_MODELS_DIR over the data dir
    assert vela(["models", "--data-dir", str(data), "add", "c", str(tiny_embedder_dir)]) == 0
    assert ModelRegistry(tmp_path / "env").names() == ["c"]
    assert not (tmp_path / "not-this-one").exists()
