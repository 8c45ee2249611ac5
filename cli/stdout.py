"""Standard output whose reader has gone (`vela models list | head`, `vela fusion show c | true`): the command
ends quietly, with the status a shell reports for a tool SIGPIPE ended, as `ls | head` ends `ls`. Python ignores
SIGPIPE, so the write raises BrokenPipeError instead, which would otherwise be printed as an error."""

from __future__ import annotations

import os
import select
import sys

SIGPIPE_STATUS = 128 + 13


def reader_gone() -> bool:
    """Whether standard output is a pipe whose reading end is closed (poll reports POLLERR on its write end).
    A BrokenPipeError from a socket (a server that closed the connection) is not this, and stays an error."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real file descriptor (captured output)
        return False


def quiet_exit() -> int:
    """What is still buffered cannot be written either: stdout goes to /dev/null, so the flush at exit is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_STATUS


def write(text: str) -> int:
    """Print `text`: 0, or SIGPIPE_STATUS where the reader has gone."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        return quiet_exit()
    return 0
