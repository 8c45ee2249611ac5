"""Stop a Trainer run at a wall-clock budget, so that two methods can be compared at the same cost.

The step count cannot express "the same budget" when two methods' steps cost differently (Revela's in-batch
attention vs REPLUG's extra LM passes); this callback ends training after the first step that finishes past
the budget, and the Trainer then saves and logs as at a normal end.
"""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments


class TimeBudgetCallback(TrainerCallback):
    def __init__(self, minutes: float) -> None:
        if minutes <= 0:
            raise ValueError(f"the time budget must be > 0 minutes, got {minutes}")
        self.seconds = minutes * 60.0
        self.started: float | None = None
        self.stopped_early = False

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.started = time.monotonic()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if self.started is not None and time.monotonic() - self.started >= self.seconds:
            self.stopped_early = state.global_step < state.max_steps
            control.should_training_stop = True
        return control
