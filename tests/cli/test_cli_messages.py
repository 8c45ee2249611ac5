"""What `vela models list` and `vela ingest` print when they stop: a closed pipe ends quietly, a refusal is one
line naming the command and the flag, and a model by its registered name, never the folder it is stored in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from models.registry import ModelRegistry
from tests.cli.beir_data import write_beir

ROOT = Path(__file__).resolve().parents[2]


def into_a_closed_pipe(data_dir: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`vela ARGS | head -1`: head exits first; the rest of the output has nowhere to go."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        env = {**os.environ, "VELA_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}
        env.pop("VELA_MODELS_DIR", None)
        return subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)


def test_models_list_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    done = into_a_closed_pipe(tmp_path, "models", "list", "--json")
    assert done.stderr.decode() == "" and done.returncode == 141  # as a tool that SIGPIPE ended


def test_any_command_into_a_closed_pipe_ends_quietly(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    """Not only the commands that write through cli/stdout.py: cli/main.py ends any command so."""
    data = tmp_path / "vela"
    args = ["--data", str(write_beir(tmp_path / "mini")), "--data-dir", str(data), "--collection", "c"]
    assert main(["ingest", *args, "--embedder", str(tiny_embedder_dir)]) == 0
    done = into_a_closed_pipe(data, "fusion", "show", "c")
    assert done.stderr.decode() == "" and done.returncode == 141


def test_ingest_names_the_collections_embedder_by_its_registered_name(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VELA_MODELS_DIR", raising=False)
    vela = tmp_path / "vela"
    ModelRegistry(vela / "models").register("ad3", tiny_embedder_dir)
    base = ["ingest", "--data", str(write_beir(tmp_path / "mini")), "--data-dir", str(vela), "--collection", "c"]
    assert main([*base, "--embedder", "ad3"]) == 0
    capsys.readouterr()
    assert main([*base, "--embedder", "default"]) == 2
    assert capsys.readouterr().err == "vela ingest: --embedder: collection 'c' uses embedder 'ad3', not 'default'\n"
    assert main([*base, "--ray", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vela ingest: --ray needs a sharded collection: 'c' has 1 shard") and err.count("\n") == 1


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    from cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"vela {version('vela')}"
