"""Structured logs: one JSON object per line, with any `extra=` fields."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

# Left out of the JSON: the record's own attributes, and uvicorn's `color_message` (the message again, with ANSI
# colour codes for a terminal).
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to sys.stderr as it is when a record is emitted, not as it was when logging was configured: a
    process whose stderr is replaced later (a test's capture, a daemon's redirection) logs to the new one instead
    of failing on a closed stream."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def configure_logging(level: str = "INFO") -> None:
    """JSON lines on stderr, for the server and the workers; also turns off the progress bars of the libraries
    that load models (Hugging Face's, tqdm's), whose carriage-return lines would break one object per line."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when transformers is imported
    os.environ.setdefault("TQDM_DISABLE", "1")
    if "transformers" in sys.modules:  # imported already: its switch is read no more
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("bm25s").setLevel(max(logging.INFO, root.level))  # it logs every build at DEBUG
