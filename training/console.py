"""What `vela train` logs on the console: the recipes' own progress at INFO, the libraries' start-up chatter not.

faiss logs at INFO every CPU build it could not load ("Could not load library with AVX512 support ...") when a
recipe first imports it; the other commands hide the same loggers (cli/console.py reads CHATTY_LOGGERS from here).
"""

from __future__ import annotations

import logging

# Loggers that speak at INFO about their own start-up (faiss lists every CPU build it could not load).
CHATTY_LOGGERS = ("faiss", "faiss.loader")


def log_to_console() -> None:
    """INFO records on stderr with time and logger; the chatty loggers at WARNING, so their warnings still show."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for name in CHATTY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.level, logging.WARNING))
