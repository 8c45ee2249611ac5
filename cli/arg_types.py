"""argparse types that refuse a bad number before any work starts (argparse prints the message, exit 2)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def int_within(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (no upper bound when high is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            within = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be {within}, got {value}")
        return value

    return parse


positive_int = int_within(1)
non_negative_int = int_within(0)
port_number = int_within(1, 65535)
