"""Exceptions raised by the client. Every one is a `VelaError` carrying the API's error `code`, its message and the
HTTP status (None when no response came back).

The API answers every failure as `{"error": {"code", "message", "details"?, "request_id"?}}`; a few answers from
in front of the application (a proxy, or the server's connection limit) are plain text, and are mapped by status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from vela_client.models import Job

# The code a response gets when its body is not the API's error shape (same table as the server's).
_STATUS_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    414: "uri_too_long",
    422: "invalid_request",
    431: "headers_too_large",
    500: "internal",
    503: "unavailable",
    507: "insufficient_storage",
}


class VelaError(Exception):
    """Base of every client error."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        details: list[dict[str, Any]] | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.details = details
        self.request_id = request_id

    def __str__(self) -> str:
        where = f"HTTP {self.status}, " if self.status is not None else ""
        rid = f", request id {self.request_id}" if self.request_id else ""
        return f"{self.message} ({where}code {self.code}{rid})"


class InvalidRequest(VelaError):
    """422 (or 400): the request does not match the API's schema or limits; `details` lists each problem."""


class InvalidSnapshot(InvalidRequest):
    """422 `invalid_snapshot`: the tar is not a snapshot this server reads (a restore or an upload)."""


class Unauthorized(VelaError):
    """401: missing or wrong API key."""


class Forbidden(VelaError):
    """403: the API key may not do this (a read-only key, VELA_READ_API_KEYS, on a request that writes)."""


class NotFound(VelaError):
    """404: no such collection, job or route (`code` says which: `collection_not_found`, `job_not_found`, ...)."""


class SnapshotNotFound(NotFound):
    """404 `snapshot_not_found`: the collection's listing has no snapshot of that name (a name is only ever one
    the server made, `<collection>-<time>-<hex>.tar`)."""


class Conflict(VelaError):
    """409: the request contradicts the current state (a job that has already ended, a collection's shards)."""


class PayloadTooLarge(VelaError):
    """413 (414 for a path, 431 for the request line and headers): the request (or its response) is over one of
    the server's limits; the message names it."""


class ServerError(VelaError):
    """A 5xx other than 503: a bug or fault on the server; quote `request_id` when reporting it."""


class Unavailable(VelaError):
    """503: the server is starting, overloaded or ran past its deadline (still raised after the retries)."""


class InsufficientStorage(VelaError):
    """507: the server's data disk is nearly full; writes, snapshots and restores are refused until its operator
    frees space (searches go on). Not retried: waiting does not free the disk."""


class ConnectionFailed(VelaError):
    """No response: the connection could not be made or broke (still raised after the retries)."""


class Timeout(VelaError, TimeoutError):
    """The client's own timeout passed, or the server gave up waiting for the request body (408)."""


class ChecksumMismatch(VelaError):
    """A downloaded file's sha256 differs from the one the server lists for it (code `sha256_mismatch`): it was
    damaged on the way or on the server, and nothing was written where it was to go."""


class ClientClosed(VelaError, RuntimeError):
    """The client was used after `close()` (or after its `with` block): make a new one (code `client_closed`)."""

    def __init__(self) -> None:
        super().__init__("this client has been closed: make a new one", code="client_closed")


class JobFailed(VelaError):
    """A waited-on job ended failed or cancelled; `job` is its final state."""

    def __init__(self, job: Job) -> None:
        message = f"job {job.id} {job.status}" + (f": {job.error}" if job.error else "")
        super().__init__(message, code=f"job_{job.status}")
        self.job = job


class JobWaitTimeout(Timeout):
    """`wait_job` gave up before the job ended; `job` is the last state seen (the job goes on)."""

    def __init__(self, job: Job, timeout: float) -> None:
        super().__init__(f"job {job.id} still {job.status} after {timeout:g} s", code="wait_timeout")
        self.job = job


_BY_STATUS: dict[int, type[VelaError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    408: Timeout,
    409: Conflict,
    413: PayloadTooLarge,
    414: PayloadTooLarge,
    422: InvalidRequest,
    431: PayloadTooLarge,
    503: Unavailable,
    507: InsufficientStorage,
}


# Codes with an error class of their own, a subclass of their status's (a SnapshotNotFound is a NotFound).
_BY_CODE: dict[str, type[VelaError]] = {
    "snapshot_not_found": SnapshotNotFound,
    "invalid_snapshot": InvalidSnapshot,
}


def error_code(response: httpx.Response) -> str:
    """The API's error code of a failed response, or the status's generic code when the body has none."""
    return _error_body(response).get("code") or _STATUS_CODES.get(response.status_code, "error")


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def error_from_response(response: httpx.Response) -> VelaError:
    """The exception for a failed (status >= 400) response."""
    status = response.status_code
    body = _error_body(response)
    message = body.get("message")
    if not isinstance(message, str) or not message:
        text = response.text.strip()
        message = text[:500] if text else f"HTTP {status} {response.reason_phrase}"
    details = body.get("details")
    code = error_code(response)
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else VelaError)
    special = _BY_CODE.get(code)
    if special is not None and issubclass(special, cls):  # only ever narrows what the status says
        cls = special
    return cls(
        message,
        code=code,
        status=status,
        details=details if isinstance(details, list) else None,
        request_id=body.get("request_id") or response.headers.get("x-request-id"),
    )


def error_from_transport(exc: httpx.TransportError, method: str, url: str) -> VelaError:
    """The exception for a request that got no response."""
    what = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return Timeout(f"{method} {url}: no answer in time ({what})", code="client_timeout")
    return ConnectionFailed(f"{method} {url}: {what}: {exc}", code="connection_failed")
