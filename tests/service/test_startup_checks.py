"""`vela serve` with a setting no API process could start with (or one that would make every new collection
fail): one line naming the variable, exit status 2, before any process starts. A model that does not load used to
make the processes fail and be started again forever; an unchecked BM25 or chunking setting answered 500 later."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main as vela


@pytest.mark.parametrize(
    ("variable", "value", "needle"),
    [
        ("VELA_PORT", "abc", "VELA_PORT: Input should be a valid integer"),
        ("VELA_BM25_METHOD", "bogus", "VELA_BM25_METHOD: String should match pattern"),
        ("VELA_BM25_K1", "-1", "VELA_BM25_K1: Input should be greater than or equal to 0"),
        ("VELA_BM25_B", "2", "VELA_BM25_B: Input should be less than or equal to 1"),
        ("VELA_CHUNK_OVERLAP", "113", "VELA_CHUNK_OVERLAP (113) must be at most half of VELA_CHUNK_TOKENS (224)"),
        ("VELA_LOG_LEVEL", "bogus", "VELA_LOG_LEVEL: String should match pattern"),
        ("VELA_API_KEYS", " , ", "VELA_API_KEYS: holds no key"),
        ("VELA_EMBEDDER", "/nonexistent", "VELA_EMBEDDER: embedder '/nonexistent' is neither"),
        ("VELA_RERANKER", "/nonexistent", "VELA_RERANKER: reranker '/nonexistent' is not a local model directory"),
        ("VELA_DOCUMENT_PRECISION", "bogus", "VELA_DOCUMENT_PRECISION must be one of auto, fp32"),
        ("VELA_FUSION_AUTO", "maybe", "VELA_FUSION_AUTO: expected one of 1, true, yes, on, 0, false, no, off"),
        ("VELA_FUSION_AUTO", "", "VELA_FUSION_AUTO: expected one of"),
        ("VELA_FUSION_AUTO", "t", "VELA_FUSION_AUTO: expected one of"),
        ("VELA_SNAPSHOTS_DIR", "/etc/hostname", "VELA_SNAPSHOTS_DIR: /etc/hostname is not a folder"),
        ("VELA_MODELS_DIR", "/proc/nope", "VELA_MODELS_DIR: /proc/nope is not a folder"),
    ],
)
def test_a_setting_no_process_could_start_with_stops_vela_serve(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    needle: str,
) -> None:
    monkeypatch.setenv(variable, value)
    monkeypatch.setenv("VELA_PROCESSES", "2")
    assert vela(["serve", "--data-dir", str(tmp_path / "data"), "--port", "1"]) == 2
    said = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("{")]  # less JSON logs
    assert len(said) == 1 and said[0].startswith("vela serve: ") and needle in said[0], said


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("1", True),
        ("TRUE", True),
        (" yes ", True),
        ("on", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_vela_fusion_auto_takes_the_usual_spellings(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    from indexing import fusion_choice
    from service.settings import Settings

    monkeypatch.setenv("VELA_FUSION_AUTO", value)
    assert Settings().fusion_auto is on
    assert fusion_choice._auto_choose() is on  # what the process's ingest jobs go by


def test_the_defaults_pass(tmp_path: Path) -> None:
    from service.settings import Settings
    from service.startup_checks import startup_problem

    assert startup_problem(Settings(data_dir=tmp_path, log_level="debug")) is None


def test_a_data_dir_it_cannot_write_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["serve", "--data-dir", "/proc/nope", "--port", "1"]) == 2
    said = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("{")]
    assert said == ["vela serve: VELA_DATA_DIR: /proc/nope is not a folder this server can write to"]


@pytest.mark.parametrize(
    ("variable", "value", "needle"),
    [
        ("VELA_CLAIM_IDLE_S", "abc", "vela worker: VELA_CLAIM_IDLE_S: Input should be a valid number"),
        ("VELA_FUSION_AUTO", "maybe", "vela worker: VELA_FUSION_AUTO: expected one of 1, true, yes, on, 0, false"),
        ("VELA_EMBEDDER", "/nonexistent", "vela worker: VELA_EMBEDDER: embedder '/nonexistent' is neither"),
    ],
)
def test_vela_worker_refuses_the_same_way(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    needle: str,
) -> None:
    monkeypatch.setenv(variable, value)
    monkeypatch.setenv("VELA_REDIS_URL", "redis://127.0.0.1:1/0")  # never reached
    monkeypatch.setattr("os.nice", lambda _: 0)  # the worker lowers its own priority: not this test process's
    assert vela(["worker", "--data-dir", str(tmp_path / "d")]) == 2
    said = [line for line in capfd.readouterr().err.splitlines() if not line.startswith("{")]
    assert len(said) == 1 and needle in said[0], said
