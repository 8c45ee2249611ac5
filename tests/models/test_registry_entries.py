"""The registry judges a folder alike wherever it meets one: `register` takes, `entries` (GET /models, `vela models
list`) lists and `remove` deletes only a whole model (a config.json that is an object, and weights)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from models.registry import BUILTIN_NAME, InvalidModelDir, ModelExists, ModelRegistry, UnknownModel, name_refusal


def test_remove_touches_nothing_but_a_model(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    reg = ModelRegistry(tmp_path / "shared")
    reg.register("tiny", tiny_embedder_dir)
    (reg.root / "collections" / "c").mkdir(parents=True)
    (reg.root / "hollow").mkdir()
    (reg.root / "hollow" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(InvalidModelDir, match="'collections' is not a model"):
        reg.remove("collections")
    with pytest.raises(InvalidModelDir, match="no weights"):
        reg.remove("hollow")
    assert (reg.root / "collections" / "c").is_dir() and (reg.root / "hollow" / "config.json").is_file()
    assert [e.name for e in reg.entries()] == [BUILTIN_NAME, "tiny"]
    reg.remove("tiny")
    assert reg.names() == ["collections", "hollow"]
    with pytest.raises(UnknownModel):
        ModelRegistry(tmp_path / "absent").remove("tiny")
    assert not (tmp_path / "absent").exists()


def test_a_built_in_name_is_taken_not_malformed(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    assert name_refusal("default") == "'default' is the built-in model's name: choose another"
    assert name_refusal("sentence-transformers/all-MiniLM-L6-v2") is not None
    assert "1-64 letters" in (name_refusal("a/b") or "") and name_refusal("ok.v2") is None
    with pytest.raises(ModelExists, match="built-in"):
        ModelRegistry(tmp_path / "models").register("sentence-transformers/all-MiniLM-L6-v2", tiny_embedder_dir)


@pytest.mark.parametrize("where", ["model.safetensors", "query_encoder/model.safetensors"])
def test_a_damaged_weights_file_is_refused_at_registration(tmp_path: Path, tiny_embedder_dir: Path, where: str) -> None:
    """A truncated or damaged copy used to be registered and then fail the first request that loaded it (a 500)."""
    src = tmp_path / "src"
    shutil.copytree(tiny_embedder_dir, src)
    (src / where).parent.mkdir(exist_ok=True)
    (src / where).write_bytes(b"garbage")
    reg = ModelRegistry(tmp_path / "models")
    with pytest.raises(InvalidModelDir, match="not a readable safetensors file"):
        reg.register("broken", src)
    assert reg.names() == []


def test_what_a_killed_register_or_remove_left_is_swept(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    reg = ModelRegistry(tmp_path / "models")
    reg.register("kept", tiny_embedder_dir)
    for leftover in (".tmp-0123abcd", ".removed-4567ef01"):  # a copy never renamed, a removal never deleted
        shutil.copytree(tiny_embedder_dir, reg.root / leftover)
    reg.register("second", tiny_embedder_dir)
    assert sorted(p.name for p in reg.root.iterdir() if p.name != ".registry.lock") == ["kept", "second"]
    shutil.copytree(tiny_embedder_dir, reg.root / ".tmp-89abcdef")
    reg.remove("second")
    assert sorted(p.name for p in reg.root.iterdir() if p.name != ".registry.lock") == ["kept"]
