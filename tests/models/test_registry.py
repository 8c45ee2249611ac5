"""The model registry on real model directories: register (a whole copy), get, list, remove, evals, and names
that never resolve to anything outside it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import safetensors.numpy

from models.registry import (
    BUILTIN_NAME,
    RERANKER_MODEL_TYPE,
    InvalidModelDir,
    InvalidModelName,
    ModelExists,
    ModelRegistry,
    UnknownModel,
    WrongModelKind,
    dims_of,
    is_model_name,
)

# A safetensors file with no tensors: weights as far as the registry judges a folder (it reads their headers).
NO_TENSORS = safetensors.numpy.save({})


def _fake_model(root: Path, config: object, **files: str | bytes) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    for name, content in files.items():
        (root / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def test_register_copies_the_whole_directory_and_records_it(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    reg = ModelRegistry(tmp_path / "models")
    entry = reg.register("tiny", tiny_embedder_dir)
    assert entry.kind == "embedder" and entry.dims == 32 and entry.created_at is not None
    assert entry.path == (tmp_path / "models" / "tiny").resolve()
    copied = {p.relative_to(entry.path) for p in entry.path.rglob("*")}
    original = {p.relative_to(tiny_embedder_dir) for p in tiny_embedder_dir.rglob("*")}
    assert copied == original | {Path("vela_registry.json")}
    # A copy, not a link: changing the source changes nothing the registry serves.
    assert os.stat(entry.path / "config.json").st_ino != os.stat(tiny_embedder_dir / "config.json").st_ino
    assert not any(p.is_symlink() for p in entry.path.rglob("*"))
    assert reg.resolve("tiny", kind="embedder") == str(entry.path)
    assert [e.name for e in reg.entries()] == [BUILTIN_NAME, "tiny"]
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".tmp-")]


def test_the_copy_follows_symlinks_and_leaves_checkpoints(tmp_path: Path) -> None:
    src = _fake_model(tmp_path / "out", {"model_type": "bert", "hidden_size": 8})
    (tmp_path / "blob").write_bytes(NO_TENSORS)
    (src / "model.safetensors").symlink_to(tmp_path / "blob")
    (src / "checkpoint-500").mkdir()
    (src / "checkpoint-500" / "big.bin").write_text("x")
    entry = ModelRegistry(tmp_path / "models").register("m", src)
    assert entry.path is not None
    weights = entry.path / "model.safetensors"
    assert not weights.is_symlink() and weights.read_bytes() == NO_TENSORS
    assert not (entry.path / "checkpoint-500").exists()


def test_kind_dims_training_args_and_evals(tmp_path: Path) -> None:
    reg = ModelRegistry(tmp_path / "models")
    rr = _fake_model(
        tmp_path / "rr",
        {"model_type": RERANKER_MODEL_TYPE},
        **{
            "training_args.json": json.dumps({"recipe_args": {"lr": 1}, "log_history": [1, 2, 3]}),
            "model.safetensors": NO_TENSORS,
        },
    )
    entry = reg.register("rr", rr)
    assert (entry.kind, entry.dims) == ("reranker", None)
    assert entry.training == {"recipe_args": {"lr": 1}}  # the step log is left out of listings
    stem = reg.add_eval("rr", {"results": {"hybrid": {"ndcg@10": 0.5}}}, label="scifact dev")
    assert stem.endswith("-scifact-dev")
    assert reg.get("rr").evals == [{"name": stem, "result": {"results": {"hybrid": {"ndcg@10": 0.5}}}}]
    with pytest.raises(ValueError):
        reg.add_eval("rr", [1, 2], label="x")
    with pytest.raises(WrongModelKind):
        reg.resolve("rr", kind="embedder")
    with pytest.raises(WrongModelKind):
        reg.resolve(BUILTIN_NAME, kind="reranker")
    assert dims_of({"model_type": "vela_cde", "second_stage": {"hidden_size": 48}}) == 48
    assert dims_of({"model_type": "vela_moe", "encoder": {"hidden_size": 16}}) == 16


def test_the_builtin_default_is_listed_and_reserved(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    reg = ModelRegistry(tmp_path / "models")
    (builtin,) = reg.entries()  # an empty (even missing) folder still lists the packaged model
    assert builtin.name == "default" and builtin.builtin and builtin.dims == 384 and "minilm" in builtin.aliases
    assert reg.resolve("default", kind="embedder") == "default"
    assert reg.resolve("minilm", kind="embedder") == "minilm"
    assert {"minilm-torch", "minilm-onnx"} <= set(builtin.aliases)  # the packaged model's two forms, by name
    assert reg.resolve("minilm-torch", kind="embedder") == "minilm-torch"
    with pytest.raises(ModelExists):
        reg.register("default", tiny_embedder_dir)
    with pytest.raises(InvalidModelName):
        reg.remove("default")


def test_a_folder_without_weights_is_refused_at_registration(tmp_path: Path) -> None:
    src = _fake_model(tmp_path / "noweights", {"model_type": "bert", "hidden_size": 16})
    with pytest.raises(InvalidModelDir, match="no weights"):
        ModelRegistry(tmp_path / "models").register("noweights", src)
    (src / "model.safetensors.index.json").write_text("{}")  # sharded weights count
    assert ModelRegistry(tmp_path / "models").register("sharded", src).kind == "embedder"


@pytest.mark.parametrize(
    "config, why",
    [([1, 2], "not an object"), ("text", "not an object"), (None, "not an object")],
)
def test_a_config_that_is_not_an_object_is_a_clear_error(tmp_path: Path, config: object, why: str) -> None:
    src = _fake_model(tmp_path / "bad", config)
    with pytest.raises(InvalidModelDir, match=why):
        ModelRegistry(tmp_path / "models").register("bad", src)
    # Put there by hand, it is an unusable entry: a clear error on use, and left out of the listing.
    reg = ModelRegistry(tmp_path / "models")
    _fake_model(reg.root / "bad", config)
    with pytest.raises(InvalidModelDir, match=why):
        reg.resolve("bad", kind="embedder")
    assert [e.name for e in reg.entries()] == [BUILTIN_NAME]


def test_register_refuses_bad_names_taken_names_and_non_models(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    reg = ModelRegistry(tmp_path / "models")
    for name in ["", ".hidden", "a/b", "..", "x" * 65, "caf\u00e9", "tab\t", "n\n"]:
        with pytest.raises(InvalidModelName):
            reg.register(name, tiny_embedder_dir)
    reg.register("tiny", tiny_embedder_dir)
    with pytest.raises(ModelExists):
        reg.register("tiny", tiny_embedder_dir)
    with pytest.raises(InvalidModelDir, match="no config.json"):
        reg.register("empty", tmp_path)
    with pytest.raises(InvalidModelDir):
        reg.register("missing", tmp_path / "nowhere")
    assert reg.names() == ["tiny"]


def test_remove(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    reg = ModelRegistry(tmp_path / "models")
    reg.register("tiny", tiny_embedder_dir)
    reg.remove("tiny")
    assert reg.names() == [] and os.listdir(reg.root) == [".registry.lock"]
    with pytest.raises(UnknownModel):
        reg.remove("tiny")
    with pytest.raises(UnknownModel):
        reg.get("tiny")


def test_symlinks_in_the_registry_are_refused(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    reg = ModelRegistry(tmp_path / "models")
    reg.register("tiny", tiny_embedder_dir)
    (reg.root / "outside").symlink_to(tiny_embedder_dir, target_is_directory=True)  # a real model, out of it
    (reg.root / "inside").symlink_to(reg.root / "tiny", target_is_directory=True)
    inner = _fake_model(reg.root / "inner", {"model_type": "bert"})
    (inner / "weights.bin").symlink_to(tiny_embedder_dir / "config.json")
    for name in ["outside", "inside", "inner"]:
        with pytest.raises(UnknownModel):
            reg.resolve(name, kind="embedder")
    assert reg.names() == ["inner", "tiny"]  # listed by folder; `inner` is then left out of entries()
    assert [e.name for e in reg.entries()] == [BUILTIN_NAME, "tiny"]


def test_names_that_are_not_registered_all_fail_alike(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    reg = ModelRegistry(tmp_path / "models")
    reg.register("tiny", tiny_embedder_dir)
    for name in ["../tiny", "./tiny", "/etc", str(reg.root / "tiny"), "tiny/", "tiny\x00", "%2e%2e", "~", "nope"]:
        with pytest.raises(UnknownModel) as info:
            reg.resolve(name, kind="embedder")
        assert str(info.value) == "no registered model of that name"


def test_name_rule() -> None:
    assert all(is_model_name(n) for n in ["a", "A-b_c.d", "0", "-x", "_", "x" * 64, "v1.2"])
    assert not any(is_model_name(n) for n in ["", ".a", "a/b", "a\\b", "x" * 65, "a b", "\u2024", "a\n", 5])
