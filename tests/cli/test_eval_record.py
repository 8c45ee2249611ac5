"""What `vela eval` records of how it ran (the model as named, the backend and precision that ran, the machine), and
the one progress bar `vela eval` and `vela ingest` draw for an ingest: not drawn again after the commit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from tests.cli.beir_data import write_beir
from tests.cli.test_reindex_console import _visible
from velaio.machine import cpu_model


def test_eval_records_the_model_as_named_and_what_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("VELA_EMBEDDER", "VELA_ENCODER", "VELA_PRECISION", "VELA_DEVICE"):
        monkeypatch.delenv(var, raising=False)  # the packaged default, served as a CPU in fp32 serves it: ONNX int8
    data, out = write_beir(tmp_path / "mini"), tmp_path / "eval.json"
    argv = ["eval", "--data", str(data), "--modes", "dense", "--workdir", str(tmp_path / "work"), "--json", str(out)]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert result["embedder"] == "default"  # not the export's path in this machine's model cache
    assert result["backend"] == "onnx" and result["precision"].startswith("int8"), result
    assert result["machine"]["cpu"] == cpu_model() and result["machine"]["cpus"] >= 1
    # Another of the default's names is recorded as given; in bf16 torch runs it, and the record says so.
    assert main([*argv, "--embedder", "minilm", "--precision", "bf16"]) == 0
    result = json.loads(out.read_text())
    assert (result["embedder"], result["backend"], result["precision"]) == ("minilm", "torch", "bf16")
    assert "document_precision" not in result


def _say_when_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line on stderr as each job commits, as a log record would: a bar still open would be drawn again below."""
    import indexing.ingest

    real = indexing.ingest.commit_collection

    def commit(*args: Any, **kwargs: Any) -> Any:
        print("committed", file=sys.stderr)
        return real(*args, **kwargs)

    monkeypatch.setattr(indexing.ingest, "commit_collection", commit)


def _bars(stderr: str, desc: str) -> list[str]:
    """The lines a terminal shows the bar on (a bar still open when `committed` is printed shows on two)."""
    return [line for line in _visible(stderr) if desc in line]


def test_ingest_draws_its_bar_once(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _say_when_committed(monkeypatch)
    data = write_beir(tmp_path / "mini")
    argv = ["ingest", "--data", str(data), "--data-dir", str(tmp_path / "vela"), "--collection", "c"]
    assert main([*argv, "--embedder", str(tiny_embedder_dir)]) == 0
    bars = _bars(capsys.readouterr().err, "ingest c:")
    assert len(bars) == 1 and "8/8" in bars[0], bars


def test_eval_draws_its_ingest_bar_once(
    tmp_path: Path, tiny_embedder_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _say_when_committed(monkeypatch)
    data = write_beir(tmp_path / "mini")
    argv = ["eval", "--data", str(data), "--modes", "bm25", "--workdir", str(tmp_path / "work")]
    assert main([*argv, "--embedder", str(tiny_embedder_dir)]) == 0
    bars = _bars(capsys.readouterr().err, "ingest mini:")
    assert len(bars) == 1 and "8/8" in bars[0], bars
