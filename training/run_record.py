"""`training_args.json`: what every recipe writes beside the weights it saved (the registry shows it as the model's
training). One writer, so that every record is whole (written atomically) and says the machine it ran on: step
counts and seconds mean little without the CPU (bf16 is faster or 5x slower depending on its extensions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from velaio.files import write_atomic
from velaio.machine import machine

TRAINING_RECORD = "training_args.json"


def write_training_record(out: Path, record: dict[str, Any]) -> None:
    """The record, with `machine` added, as `out/training_args.json`."""
    text = json.dumps({**record, "machine": machine()}, indent=2, default=str) + "\n"
    write_atomic(Path(out) / TRAINING_RECORD, text.encode())
