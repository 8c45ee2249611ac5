"""What `vela adapt` checks: before it starts work, the student it trains (the name it registers is checked as
`vela train --register` checks one, by cli/models.py's check_register_name); after pseudo-labelling, that the
budget leaves time to train. And the work directory a run trains in.

Pseudo-labelling comes first and takes a while (seconds on a tiny collection, minutes on a large one), so every
argument that can be checked without it is checked before it: a bad one is one line and exit 2, with nothing
written.
"""

from __future__ import annotations

import math
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SAVE_RESERVE_S = 20.0  # of the budget, kept for saving and registering the model
MIN_TRAIN_S = 10.0  # of the budget, the least training worth registering a model for


class BudgetSpent(RuntimeError):
    """Pseudo-labelling took the time --max_minutes gave the whole run: nothing is trained or registered."""


def resolve_student(name: str) -> str:
    """--student as the trainers load it: a built-in name as it is, else the model's folder (registered or given),
    named as every offline command names a model (cli/model_names.py). ValueError (one line) for what that refuses,
    and for a model the trainers cannot train: the ONNX form of the built-in, or a folder without torch weights."""
    from cli.model_names import resolve_model
    from models.loading import ONNX_ALIASES
    from models.registry import BUILTIN_NAMES

    if name in ONNX_ALIASES:
        raise _refusal(name, "is the ONNX form of the built-in model, which cannot be trained: use 'default'")
    choice = resolve_model(name, kind="embedder", flag="--student")
    # A folder, registered or given, must hold torch weights (the built-in's are packaged).
    torch_weights = ("*.safetensors", "*.bin", "*.safetensors.index.json")
    if name not in BUILTIN_NAMES and not any(next(Path(choice.load).glob(p), None) for p in torch_weights):
        raise _refusal(name, "has no torch weights (an ONNX export cannot be trained): give the model it came from")
    return choice.load


def _refusal(name: str, why: str) -> ValueError:
    return ValueError(f"--student: {name!r} {why}")


def student_width_problem(student: str, collection: str, dims: int) -> str | None:
    """Why `student` cannot train the query side of a collection of `dims`-d vectors (None: it can, or its
    config does not say). The query tower trains against the collection's document vectors as they are, so a
    student of another width fails at its first step, after the whole pseudo-labelling; its config.json tells
    up front (its hidden size: the vectors' width, models/model_folder.py)."""
    from cli.models import model_dims

    width = model_dims(student)
    if width is None or width == dims:
        return None
    return (
        f"--student: {width}-d vectors, but collection {collection!r} holds {dims}-d vectors: --tower query trains "
        f"against them, so the student must make {dims}-d vectors (or train both sides: --tower both)"
    )


def training_minutes(max_minutes: float, prep_s: float) -> float:
    """What is left of the budget for training once pseudo-labels are made (`prep_s`) and saving is set aside.

    BudgetSpent when that is under the least worth training: a few steps would register the base model under a
    new name, and training on regardless would overrun the budget the operator set, so the run stops and says
    what budget would do. The reserve and the least are a tenth of the budget each where the budget is short
    (a test's seconds), else SAVE_RESERVE_S and MIN_TRAIN_S."""
    budget_s = max_minutes * 60.0
    reserve_s, least_s = min(SAVE_RESERVE_S, 0.1 * budget_s), min(MIN_TRAIN_S, 0.1 * budget_s)
    left_s = budget_s - prep_s - reserve_s
    if left_s < least_s:
        suggest = math.ceil((1.2 * prep_s + SAVE_RESERVE_S + 60.0) / 60.0)  # the labelling again, and a minute
        raise BudgetSpent(
            f"pseudo-labelling took {prep_s:.0f} s of the {max_minutes:g}-minute budget (--max_minutes), leaving "
            f"{max(left_s, 0.0):.0f} s to train ({reserve_s:.0f} s are kept for saving): nothing was trained or "
            f"registered; run again with --max_minutes {suggest} or more, or fewer pseudo-queries (--max_queries)"
        )
    return left_s / 60.0


@contextmanager
def fresh_work_dir(adapt_root: Path, name: str) -> Iterator[Path]:
    """A new, empty folder for this run to train in, beside `adapt_root / name` (hidden); removed if the block
    raises (an interrupt too, and SIGTERM, which `vela adapt` turns into one), so a failed run leaves nothing. A
    finished run moves it to `adapt_root / name` with `settle_work_dir`.

    A run never trains in a folder an earlier run left: the name's model may have been removed and the name
    adapted again, and a file of the earlier run (its `query_encoder/`, say) would be registered with the new
    model though nothing in it names that file.

    While the run lives it holds a lock on `<folder>.lock`; a killed run (SIGKILL, a power cut) cannot remove its
    folder, so every run first removes the folders whose lock nobody holds (`sweep_dead_runs`)."""
    adapt_root.mkdir(parents=True, exist_ok=True)
    sweep_dead_runs(adapt_root)
    while True:  # a sweep running beside this one may take a lock file the moment it is made: another name
        work = adapt_root / f".{name}.run-{uuid.uuid4().hex[:12]}"
        lock = work.with_name(work.name + LOCK_SUFFIX)
        fd = _try_lock(lock)
        if fd is not None and _still_there(fd, lock):
            break
        if fd is not None:
            os.close(fd)
    try:
        work.mkdir()  # after the lock: a sweep never sees this folder unlocked
        try:
            yield work
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    finally:
        lock.unlink(missing_ok=True)  # before the lock is let go: a sweep then has nothing to take
        os.close(fd)


LOCK_SUFFIX = ".lock"


def sweep_dead_runs(adapt_root: Path) -> list[Path]:
    """Remove the work folders of runs that died without cleaning up (their lock is free), and their lock files;
    the folders removed. A folder without a lock file (an older version's) is left: nothing tells it is dead."""
    removed = []
    for lock in sorted(adapt_root.glob(f".*.run-*{LOCK_SUFFIX}")):
        fd = _try_lock(lock)
        if fd is None:
            continue  # its run is alive
        try:
            work = lock.with_name(lock.name[: -len(LOCK_SUFFIX)])
            if work.is_dir():
                shutil.rmtree(work, ignore_errors=True)
                removed.append(work)
            lock.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return removed


def _still_there(fd: int, path: Path) -> bool:
    """Whether `path` is still the file `fd` opened (a sweep unlinks the lock files it takes)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _try_lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive lock on `path` (created if missing), or None where another open
    holds it. The kernel lets the lock go when its process dies, however it dies."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def settle_work_dir(work: Path, final: Path) -> Path:
    """Put a finished run's folder at `final` (the name's work directory), replacing an earlier run's."""
    if os.path.lexists(final):
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:12]}")
        os.rename(final, old)
        shutil.rmtree(old, ignore_errors=True)
    os.rename(work, final)
    return final
