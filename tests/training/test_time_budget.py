import time

import pytest
from transformers import TrainerControl, TrainerState, TrainingArguments

from training.time_budget import TimeBudgetCallback


def _step(callback: TimeBudgetCallback, state: TrainerState) -> TrainerControl:
    args = TrainingArguments(output_dir="unused", report_to=[])
    return callback.on_step_end(args, state, TrainerControl())


def test_training_stops_after_the_budget_and_says_it_stopped_early() -> None:
    callback = TimeBudgetCallback(minutes=0.001)  # 60 ms
    state = TrainerState(max_steps=100, global_step=1)
    callback.on_train_begin(TrainingArguments(output_dir="unused", report_to=[]), state, TrainerControl())
    assert not _step(callback, state).should_training_stop
    time.sleep(0.08)
    assert _step(callback, state).should_training_stop
    assert callback.stopped_early


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="> 0 minutes"):
        TimeBudgetCallback(minutes=0)
