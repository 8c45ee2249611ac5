"""One way to name a model on the command line: `vela eval --embedder/--rerank`, `vela ingest --embedder`,
`vela adapt --student` and `vela export-onnx MODEL` take a registered name, a built-in name or a model folder,
resolved alike, and refuse the same things in the same one line (exit 2, nothing made); `vela reindex --embedder`
takes registered names and tells a folder how to become one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli.main import main
from indexing.store import CollectionStore
from models.registry import ModelRegistry
from tests.cli.beir_data import write_beir
from tests.reranker_fixtures import make_reranker

LIST_HINT = "(`vela models list` shows them)"


@pytest.fixture
def vela(tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data directory (the environment's, as `vela models` finds it) whose registry holds the embedder `tiny`
    and the reranker `rr`."""
    vela = tmp_path / "vela"
    monkeypatch.setenv("VELA_DATA_DIR", str(vela))
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    monkeypatch.delenv("VELA_EMBEDDER", raising=False)
    registry = ModelRegistry(vela / "models")
    registry.register("tiny", tiny_embedder_dir)
    registry.register("rr", make_reranker("bert", tmp_path / "rr-src"))
    return vela


def _command(cmd: str, model: str, tmp_path: Path, vela: Path) -> list[str]:
    data = str(write_beir(tmp_path / "mini")) if not (tmp_path / "mini").exists() else str(tmp_path / "mini")
    eval_ = ["eval", "--data", data, "--workdir", str(tmp_path / "work")]
    return {
        "eval --embedder": [*eval_, "--embedder", model],
        "eval --rerank": [*eval_, "--embedder", "tiny", "--rerank", model],
        "ingest --embedder": ["ingest", "--data", data, "--collection", "c", "--data-dir", str(vela), "--embedder"]
        + [model],
        "adapt --student": ["adapt", "c", "--out", "new1", "--data-dir", str(vela), "--student", model],
        "export-onnx MODEL": ["export-onnx", model, "--out", str(tmp_path / "work" / "onnx")],
    }[cmd]


EMBEDDER_FLAGS = ["eval --embedder", "ingest --embedder", "adapt --student", "export-onnx MODEL"]


@pytest.mark.parametrize("cmd", [*EMBEDDER_FLAGS, "eval --rerank"])
def test_every_command_refuses_a_model_in_the_same_words_before_any_work(
    cmd: str, vela: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    flag = cmd.split()[1]
    other = "rr" if cmd in EMBEDDER_FLAGS else "tiny"
    wrong = "a reranker, not an embedder" if cmd in EMBEDDER_FLAGS else "an embedder, not a reranker"
    cases = {
        "nosuch": f"'nosuch' is neither a registered model {LIST_HINT} nor a model directory",
        str(empty): f"'{empty}' is not a model directory: no config.json: not a Hugging Face model directory",
        other: f"'{other}' is {wrong}",
    }
    if cmd == "eval --rerank":
        cases["default"] = "'default' is the built-in embedder, not a reranker"
    capsys.readouterr()
    for model, said in cases.items():
        assert main(_command(cmd, model, tmp_path, vela)) == 2, model
        assert capsys.readouterr().err == f"vela {cmd.split()[0]}: {flag}: {said}\n"
    assert sorted(p.name for p in vela.iterdir()) == ["models"]  # no collection, job or adapt folder
    assert not (tmp_path / "work").exists()


def test_a_registered_name_and_a_folder_resolve_alike(
    vela: Path,
    tmp_path: Path,
    tiny_embedder_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_embedder_dir, tmp_path / "tiny")  # a folder here with a registered model's name
    base = ["ingest", "--data", str(write_beir(tmp_path / "mini")), "--data-dir", str(vela)]
    for coll, model in [("named", "tiny"), ("here", "./tiny"), ("folder", str(tiny_embedder_dir))]:
        assert main([*base, "--collection", coll, "--embedder", model]) == 0
    store = CollectionStore(vela)
    # The bare word is the registered model (what a server on this data directory calls `tiny`); ./tiny the folder.
    assert store.get("named").settings.embedder == str((vela / "models" / "tiny").resolve())
    assert store.get("here").settings.embedder == str((tmp_path / "tiny").resolve())
    assert store.get("folder").settings.embedder == str(tiny_embedder_dir.resolve())
    # The same name again is the same embedder; another is refused as the collection's other embedder.
    assert main([*base, "--collection", "named", "--embedder", "tiny"]) == 0
    capsys.readouterr()
    assert main([*base, "--collection", "named", "--embedder", "default"]) == 2
    assert "uses embedder" in capsys.readouterr().err


def test_export_onnx_takes_a_registered_name(vela: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tiny-onnx"
    assert main(["export-onnx", "tiny", "--out", str(out), "--no-quantize"]) == 0
    assert capsys.readouterr().out.strip() == str(out.resolve())
    assert json.loads((out / "vela_embedder.json").read_text())["backend"] == "onnx"


def test_eval_takes_registered_names_and_records_them(
    vela: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, out = write_beir(tmp_path / "mini"), tmp_path / "eval.json"
    argv = ["eval", "--data", str(data), "--modes", "dense", "--workdir", str(tmp_path / "work"), "--json", str(out)]
    assert main([*argv, "--embedder", "tiny", "--rerank", "rr", "--rerank-top-n", "4"]) == 0
    result = json.loads(out.read_text())
    assert result["embedder"] == "tiny" and result["rerank"]["model"] == "rr"  # as named, not the registry paths
    assert (result["backend"], result["precision"]) == ("torch", "fp32")
    assert (result["rerank"]["backend"], result["rerank"]["precision"]) == ("torch", "fp32")


def test_reindex_takes_registered_names_and_says_how_to_register_a_folder(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    vela = tmp_path / "vela"
    base = ["reindex", "c", "--data-dir", str(vela), "--embedder"]
    assert main([*base, str(tiny_embedder_dir)]) == 2
    assert capsys.readouterr().err == (
        f"vela reindex: --embedder: '{tiny_embedder_dir}' is a folder, and this command takes a registered model's "
        f"name (it is recorded by name): register the folder with `vela models add NAME {tiny_embedder_dir}`, "
        "then give NAME\n"
    )
    assert main([*base, "nosuch"]) == 2
    assert capsys.readouterr().err == f"vela reindex: --embedder: no registered model named 'nosuch' {LIST_HINT}\n"
    assert not vela.exists()  # refused before the data directory was opened
