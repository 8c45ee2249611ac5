"""When a failed request is sent again, and after how long (shared by the sync and async clients)."""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from vela_client.errors import error_code
from vela_client.routes import Route

log = logging.getLogger("vela_client")

# Errors raised before the request could have reached the server: sending again is safe for every route.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
# The connection broke mid-exchange: the server may have acted, so only idempotent routes are sent again.
_BROKEN = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff for 503 answers and connection errors.

    `attempts` counts every try, the first included (1 turns retries off). The wait before try n+1 is
    `backoff_s * 2**(n-1)`, capped at `max_backoff_s`, with jitter (half to all of it) so that many clients do not
    come back in step; a `Retry-After` header on the 503 replaces it (capped at `max_retry_after_s`).

    A 503 with code `timeout` is not retried: the server already spent its whole deadline on that request, and
    sending it again would most likely do the same (ask for less instead). Client-side timeouts are not retried
    either, for the same reason.
    """

    attempts: int = 4
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.backoff_s < 0 or self.max_backoff_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("backoff times must not be negative")

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait after failed try number `attempt` (1-based)."""
        given = parse_retry_after(retry_after)
        if given is not None:
            return min(given, self.max_retry_after_s)
        backoff: float = min(self.backoff_s * 2.0 ** (attempt - 1), self.max_backoff_s)
        return backoff * random.uniform(0.5, 1.0)


NO_RETRY = RetryPolicy(attempts=1)


def parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:  # "nan" and "inf" parse as floats but are no delay a server meant
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retry_delay(
    policy: RetryPolicy,
    route: Route,
    attempt: int,
    *,
    response: httpx.Response | None = None,
    error: httpx.TransportError | None = None,
    final_codes: frozenset[str] = frozenset(),
) -> float | None:
    """How long to wait before sending again, or None when this outcome is final (`final_codes`: codes of a 503 the
    caller handles itself)."""
    if attempt >= policy.attempts or not route.retry:
        return None
    if response is not None:
        if response.status_code != 503 or error_code(response) in ("timeout", *final_codes):
            return None
        delay = policy.delay(attempt, response.headers.get("retry-after"))
        why = f"HTTP 503 {error_code(response)}"
    elif isinstance(error, _NOT_SENT) or (isinstance(error, _BROKEN) and route.idempotent):
        delay = policy.delay(attempt)
        why = type(error).__name__
    else:
        return None
    log.info(
        "retrying %s %s in %.2f s after %s (try %d of %d)",
        route.method,
        route.path,
        delay,
        why,
        attempt + 1,
        policy.attempts,
        extra={"vela_delay_s": delay, "vela_attempt": attempt + 1},
    )
    return delay
