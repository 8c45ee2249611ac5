"""Checkpoints in a recipe's `--out` folder: which one a run resumes from, and what is left behind.

No torch or transformers here: `vela train` calls these while it is still checking its arguments.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# What resumable recipes save unless told otherwise: an interrupted run can go on from at most 100 steps back,
# and one checkpoint (weights, optimizer, scheduler, RNG) sits on disk at a time. HF deletes the older one
# only once the newer is complete, so a kill while saving still leaves one to resume from.
CHECKPOINT_DEFAULTS: dict[str, Any] = {"save_strategy": "steps", "save_steps": 100, "save_total_limit": 1}
CHECKPOINT_FLAGS = ("save_strategy", "save_steps", "save_total_limit")
STATE_FILE = "trainer_state.json"  # the Trainer writes it last: a checkpoint without it is incomplete
_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")


def _checkpoints(folder: Path) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _CHECKPOINT_DIR.match(p.name)) and p.is_dir()]
    return sorted(found)


def latest_checkpoint(folder: Path) -> Path | None:
    """The complete checkpoint of the highest step in `folder` (one cut short while saving is passed over)."""
    complete = [path for _, path in _checkpoints(folder) if (path / STATE_FILE).is_file()]
    return complete[-1] if complete else None


def wants_resume(value: str | None) -> bool:
    """Whether `--resume_from_checkpoint` asks for anything (`false` or empty: no)."""
    return value is not None and value.strip().lower() not in ("", "false")


def resolve_resume(value: str | None, output_dir: str) -> str | None:
    """`--resume_from_checkpoint`: a checkpoint folder, or `true` for the latest one in `--out` (as the HF
    Trainer reads it). The checkpoint folder (None when not asked), or ValueError naming what is wrong."""
    if value is None or not wants_resume(value):
        return None
    if value.strip().lower() == "true":
        latest = latest_checkpoint(Path(output_dir))
        if latest is None:
            raise ValueError(f"--resume_from_checkpoint true: no complete checkpoint-N folder in {output_dir}")
        return str(latest)
    path = Path(value)
    if not (path / STATE_FILE).is_file():
        why = "it is not a folder" if not path.is_dir() else f"it has no {STATE_FILE} (cut short while saving?)"
        raise ValueError(f"--resume_from_checkpoint {value}: not a training checkpoint: {why}")
    return str(path)


def check_resume_fits(checkpoint: str, max_steps: int) -> None:
    """A checkpoint only fits a run of the same length: the Trainer skips the batches it had trained, so a
    different plan (other pairs, batch size, epochs or --max_steps) would train on the wrong ones."""
    saved = json.loads((Path(checkpoint) / STATE_FILE).read_text()).get("max_steps")
    if saved is not None and int(saved) != max_steps:
        raise ValueError(
            f"{checkpoint} belongs to a run of {saved} steps but these arguments make {max_steps}: "
            "resume with the arguments of the run that saved it"
        )


def drop_checkpoints(folder: Path) -> None:
    """Remove the checkpoint-N folders once the finished model is saved beside them."""
    for _, path in _checkpoints(folder):
        shutil.rmtree(path, ignore_errors=True)


def remove_if_empty(folder: Path) -> None:
    """A run that stopped before saving anything leaves no folder behind."""
    with contextlib.suppress(OSError):  # rmdir refuses a folder that holds anything
        folder.rmdir()


@contextlib.contextmanager
def no_empty_out(out: Path) -> Iterator[None]:
    """Around a recipe's training: an interrupt or a failure before anything was saved removes the `--out`
    folder the run made (the Trainer makes it as it starts); one that was there before stays."""
    made = not out.exists()
    try:
        yield
    except BaseException:
        if made:
            remove_if_empty(out)
        raise


def drop_default_checkpoints(out: Path, given: set[str]) -> None:
    """Once the finished model is saved: the checkpoints saved by default go, while those the user asked for
    (`given`, the flags the command line set, names one of CHECKPOINT_FLAGS) stay."""
    if not given & set(CHECKPOINT_FLAGS):
        drop_checkpoints(out)


def resume_fits(checkpoint: str) -> Any:
    """A callback that stops a resumed run whose step count differs from the checkpoint's (see
    check_resume_fits): the Trainer knows the count only once it starts."""
    from transformers import TrainerCallback

    class ResumeFits(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            check_resume_fits(checkpoint, state.max_steps)

    return ResumeFits()
