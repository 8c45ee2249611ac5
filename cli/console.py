"""What long CLI commands (`vela adapt`, `vela reindex`, `vela ingest`, `vela eval`) show on the console while they
work: one progress bar per job that counts documents, a failed job's error once, and the libraries' own chatter
kept out of the way.

A bar is drawn on the first report of a size, not before: a job that counts nothing (a promotion, a rollback)
shows no `0doc` bar, and model loading that happens before the first document does not print between the bar's
start and its end. It is closed as soon as the count reaches its total, so work after the last document (the
commit, the fusion choice, the gate) cannot make it print a second time with a later elapsed time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tqdm import tqdm

# Loggers that speak at INFO about their own start-up: one list, the training console's (training may not import cli).
from training.console import CHATTY_LOGGERS

# The job runner's logger: it logs a failed job with its traceback, for servers' logs (indexing/ingest.py).
JOB_LOGGER = "vela.ingest"


class DocumentBar:
    """An `on_progress(done, total)` callback that draws one tqdm bar of documents: from the start when `total` is
    known then (at 0, so that its rate counts from there), else from the first report on."""

    def __init__(self, desc: str, total: int | None = None) -> None:
        self.desc = desc
        self.bar: tqdm[Any] | None = None
        self.closed = False
        self.total = total

    def __call__(self, done: int, total: int) -> None:
        if self.closed or total <= 0:
            return
        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.desc, unit="doc")
        self.bar.total = total
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None and not self.closed:
            self.bar.close()
        self.closed = True

    def __enter__(self) -> DocumentBar:
        if self.total and self.bar is None:
            self.bar = tqdm(total=self.total, desc=self.desc, unit="doc")
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@contextmanager
def quiet_libraries() -> Iterator[None]:
    """While entered: no Hugging Face progress bars (loading or writing a model's weights, instant for the models
    trained here, one pair per load) and the chatty loggers at WARNING, so their warnings still show. Put back as
    they were on exit (the CLI's commands also run inside tests and other commands)."""
    from transformers.utils import logging as hf_logging

    bars_were_on = hf_logging.is_progress_bar_enabled()
    levels = {name: logging.getLogger(name).level for name in CHATTY_LOGGERS}
    hf_logging.disable_progress_bar()
    for name in CHATTY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.level, logging.WARNING))
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if bars_were_on:
            hf_logging.enable_progress_bar()


class _FailedJobRecord(logging.Filter):
    """Drops the job runner's record of a failed job (an error with its traceback): the command prints the job's
    error itself, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.exc_info)


@contextmanager
def job_errors_in_one_line() -> Iterator[None]:
    """While a CLI command runs a job in its own process: the runner's "job failed" record, whose traceback would
    come before the command's own output, is not emitted; VELA_DEBUG=1 keeps it (with the traceback)."""
    if os.environ.get("VELA_DEBUG"):
        yield
        return
    logger, drop = logging.getLogger(JOB_LOGGER), _FailedJobRecord()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)
