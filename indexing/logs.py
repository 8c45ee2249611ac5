"""Structured logs: one JSON object per line, with any `extra=` fields.

Every line names the process that wrote it (`pid`, and `slot` in an API process that `vela serve` started among
several: VELA_PROCESS_SLOT), so that the lines of several API processes sharing one stderr can be told apart. A
traceback goes to the `exc` field, never into `msg`: also one that a library logs as the text of its message
(uvicorn logs an application's failed start-up that way)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

# Left out of the JSON: the record's own attributes, and uvicorn's `color_message` (the message again, with ANSI
# colour codes for a terminal).
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "color_message"}
# The environment variable that holds an API process's slot (0 to N-1) among the processes of one `vela serve`; a
# process started again in place of one that died takes its slot. Read per line: it is set after logging is set up.
SLOT_ENV = "VELA_PROCESS_SLOT"
TRACEBACK = "Traceback (most recent call last):"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg, exc = split_traceback(record.getMessage())
        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": msg,
            "pid": record.process,
        }
        slot = os.environ.get(SLOT_ENV)
        if slot is not None:
            out["slot"] = int(slot) if slot.isdigit() else slot
        # An `extra` field of the same name wins: the supervisor's lines about one of its processes name that one.
        out.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            formatted = self.formatException(record.exc_info)
            exc = formatted if exc is None else f"{exc}\n{formatted}"
        if exc is not None:
            out["exc"] = exc
        return json.dumps(out, default=str)


def split_traceback(message: str) -> tuple[str, str | None]:
    """(the message, the traceback it holds or None). A message that is a formatted traceback (Starlette hands
    uvicorn a failed start-up as `traceback.format_exc()`, which uvicorn logs as the message) keeps the text before
    the traceback, or else the traceback's last line: the exception, e.g. `redis.exceptions.ConnectionError: ...`."""
    at = message.find(TRACEBACK)
    if at < 0 or (at > 0 and message[at - 1] != "\n"):
        return message, None
    before, traceback = message[:at].strip(), message[at:].rstrip()
    return before or traceback.rsplit("\n", 1)[-1].strip(), traceback


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
