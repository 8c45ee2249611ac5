"""`vela adapt` refuses before any work what would otherwise fail (or run unbounded) after pseudo-labelling: a
non-finite number, a negative cap, a missing --queries file, a student whose vectors are not the collection's
width; and a run stopped by SIGTERM or killed outright leaves no work folder behind."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from models.registry import ModelRegistry
from tests.cli.test_adapt_checks import FLAGS, no_pseudo_labelling, vela_fixture  # noqa: F401  the fixture `vela`


def _refused(vela: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    capsys.readouterr()
    assert main(["adapt", "notes", "--out", "x1", "--data-dir", str(vela), *flags]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("vela adapt: "), err
    return err.strip()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--max_minutes", "nan"], "--max_minutes must be a finite number, got nan"),
        (["--max_minutes", "inf"], "--max_minutes must be a finite number, got inf"),
        (["--fusion_alpha", "nan"], "--fusion_alpha must be a finite number"),
        (["--interpolation", "inf"], "--interpolation must be a finite number"),
        (["--temperature", "nan"], "--temperature must be a finite number"),
        (["--teacher_temperature", "inf"], "--teacher_temperature must be a finite number"),
        (["--learning_rate", "nan"], "--learning_rate must be a finite number"),
        (["--checkpoint_minutes", "1", "nan"], "--checkpoint_minutes must be a finite number, got nan"),
        (["--checkpoint_minutes", "-1"], "--checkpoint_minutes must each be > 0 (minutes of training), got -1"),
        (["--max_queries", "-1"], "--max_queries must be >= 1 (0: no cap), got -1"),
        (["--queries", "/nonexistent/queries.txt"], "--queries: no file /nonexistent/queries.txt"),
    ],
)
def test_a_bad_number_or_file_is_refused_before_any_work(
    vela: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, flags: list[str], said: str
) -> None:
    no_pseudo_labelling(monkeypatch)
    assert _refused(vela, capsys, *flags).startswith(f"vela adapt: {said}")
    assert not (vela / "adapt").exists()


def test_a_student_of_another_width_is_refused_before_pseudo_labelling(
    vela: Path,
    tmp_path: Path,
    tiny_embedder_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The collection's vectors are 32-d (the tiny model); a 48-d folder and the 384-d built-in cannot train its
    query side. The same folder may train both sides (nothing fixed to match)."""
    wide = shutil.copytree(tiny_embedder_dir, tmp_path / "wide")
    config = json.loads((wide / "config.json").read_text())
    (wide / "config.json").write_text(json.dumps({**config, "hidden_size": 48}))
    no_pseudo_labelling(monkeypatch)
    err = _refused(vela, capsys, "--student", str(wide))
    assert err.startswith("vela adapt: --student: 48-d vectors, but collection 'notes' holds 32-d vectors"), err
    assert "384-d vectors" in _refused(vela, capsys, "--student", "default")
    assert not (vela / "adapt").exists()
    from cli.adapt_checks import student_width_problem

    assert student_width_problem(str(tiny_embedder_dir), "notes", 32) is None


def test_sigterm_removes_the_work_dir_as_ctrl_c_does(
    vela: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd, `docker stop` and `timeout` stop with SIGTERM, whose default ends the process with no clean-up."""
    got: list[int] = []

    def ours(signum: int, _frame: Any) -> None:  # stands in for the default, which would end pytest itself
        got.append(signum)

    def terminated(*_: Any, out: Path, **__: Any) -> None:
        (out / "config.json").write_text("{}")  # partway through writing the model
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2)  # the handler runs before this returns
        raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr("training.adapt.trainer.train", terminated)
    before = signal.signal(signal.SIGTERM, ours)
    try:
        code = main(["adapt", "notes", "--out", "cut", "--tower", "both", "--data-dir", str(vela), *FLAGS])
        assert signal.getsignal(signal.SIGTERM) is ours  # put back once adapt is done
    finally:
        signal.signal(signal.SIGTERM, before)
    assert code == 130 and got == []
    assert capsys.readouterr().err.strip().splitlines()[-1] == "vela adapt: interrupted"
    assert list((vela / "adapt").iterdir()) == []
    assert "cut" not in ModelRegistry(vela / "models").names()


def test_a_run_sweeps_the_work_dirs_of_killed_runs_and_keeps_live_ones(tmp_path: Path) -> None:
    from cli.adapt_checks import fresh_work_dir

    root = tmp_path / "adapt"
    root.mkdir()
    dead, live, legacy = (root / f".m.run-{h}" for h in ("dead00000000", "live00000000", "legacy000000"))
    for work in (dead, live, legacy):
        (work / "query_encoder").mkdir(parents=True)
    (root / f"{dead.name}.lock").touch()  # its run was killed: nobody holds the lock
    (root / ".gone.run-000000000000.lock").touch()  # killed before it made its folder
    held = os.open(root / f"{live.name}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # a run still working
    try:
        with fresh_work_dir(root, "m") as work:
            assert (root / f"{work.name}.lock").is_file()
            left = sorted(p.name for p in root.iterdir())
    finally:
        os.close(held)
    assert left == sorted([legacy.name, live.name, f"{live.name}.lock", work.name, f"{work.name}.lock"])
    assert not (root / f"{work.name}.lock").exists()  # let go with the run
