"""One error shape for every failure: {"error": {"code", "message", "details"?, "request_id"}}, with stable codes."""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from indexing.deadline import DeadlineExceeded
from indexing.filter_parser import parse_filter
from indexing.filters import FilterError, Node, Schema
from indexing.jobs import JobStoreMoved
from indexing.queue import QueueUnavailable
from service.capacity import DiskFull, QueueFull, free_disk
from service.model_registry import ModelUnavailable

log = logging.getLogger("vela.service")

# Set by the outermost middleware for each request; every error body and error log line carries it.
REQUEST_ID: ContextVar[str | None] = ContextVar("vela_request_id", default=None)

STATUS_CODES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    414: "uri_too_long",
    422: "invalid_request",
    500: "internal",
    503: "unavailable",
    507: "insufficient_storage",
}


class ApiError(StarletteHTTPException):
    """An HTTP error with a stable machine-readable code (raised only by the API layer)."""

    def __init__(self, status_code: int, code: str, message: str) -> None:
        super().__init__(status_code=status_code, detail=message)
        self.code = code


def shown(value: str, limit: int = 100) -> str:
    """A client's value quoted in a message, cut to `limit` characters: an answer's size is bounded by the server,
    not by what was sent."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f" (first {limit} of {len(value)} characters)"


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if status == 422 and not details:  # every 422 lists its problems, as a validation error does (here, one)
        details = [{"loc": [], "msg": message, "type": code}]
    if details:
        body["details"] = details
    request_id = REQUEST_ID.get()
    if request_id is not None:
        body["request_id"] = request_id
    headers = dict(headers or {})
    if status == 401:
        headers.setdefault("WWW-Authenticate", "Bearer")
    return JSONResponse({"error": body}, status_code=status, headers=headers or None)


def _chain(exc: BaseException | None) -> list[BaseException]:
    """`exc` and what caused it: a chain, never a cycle, followed a few links."""
    out: list[BaseException] = []
    while exc is not None and len(out) < 8:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def out_of_files(exc: BaseException | None) -> bool:
    """Whether `exc` (or what caused it) is the process or the system running out of file handles."""
    return any(isinstance(e, OSError) and e.errno in (errno.EMFILE, errno.ENFILE) for e in _chain(exc))


# SQLite's messages for the same faults (sqlite3 raises OperationalError, with no errno).
_SQLITE_FULL = ("database or disk is full",)
_SQLITE_UNWRITABLE = ("attempt to write a readonly database", "disk i/o error")
NEARLY_FULL_BYTES = 1024 * 1024  # free bytes under which SQLite's "disk I/O error" is taken for a full disk


def storage_fault(exc: BaseException | None, data_dir: Path | None = None) -> str | None:
    """ "full" when `exc` (or what caused it) is the data directory's disk out of space, "unwritable" when its
    filesystem refused the write (read-only, failing): neither is a bug of the request. None otherwise.

    SQLite reports some writes that found no room as "disk I/O error" (a journal or shared-memory file that could
    not grow: seen with under 64 KiB free): with `data_dir`'s disk nearly full, that is a full disk too."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return "full"
        if isinstance(e, OSError) and e.errno in (errno.EROFS, errno.EIO):
            return "unwritable"
        if isinstance(e, sqlite3.OperationalError):
            text = str(e).lower()
            if any(m in text for m in _SQLITE_FULL):
                return "full"
            if any(m in text for m in _SQLITE_UNWRITABLE):
                return "full" if "i/o" in text and _nearly_full(data_dir) else "unwritable"
    return None


def _nearly_full(data_dir: Path | None) -> bool:
    if data_dir is None:
        return False
    try:
        return free_disk(data_dir)[0] < NEARLY_FULL_BYTES
    except OSError:
        return False


def internal_error(exc: BaseException | None = None, data_dir: Path | None = None) -> JSONResponse:
    """What a client sees of a bug: the shape and the request id to quote, never a traceback. Faults that are no
    bug of the request get their own answers: out of file handles is a 503, to send again later as the operator
    raises the limit; a full disk is a 507, as below VELA_MIN_FREE_DISK_MB (the free-space check runs before a
    write, and space can run out after it); a filesystem that refuses writes is a 503 until the operator mends it.
    In each case nothing of the request was kept."""
    if out_of_files(exc):
        message = (
            "the server has no file handle left (its open-files limit, RLIMIT_NOFILE): try again later; "
            "the operator raises the limit or deletes collections"
        )
        return error_response(503, "unavailable", message, headers={"Retry-After": "5"})
    fault = storage_fault(exc, data_dir)
    if fault == "full":
        message = "the data directory's disk is full: nothing was stored; free space, then send the request again"
        return error_response(507, "insufficient_storage", message)
    if fault == "unwritable":
        message = (
            "the data directory cannot be written (a read-only or failing filesystem): nothing was stored; "
            "searches and reads go on while the operator mends it"
        )
        return error_response(503, "unavailable", message, headers={"Retry-After": "30"})
    rid = REQUEST_ID.get()
    message = f"internal error; quote request id {rid} when reporting it" if rid else "internal error"
    return error_response(500, "internal", message)


def _unparsable(exc: BaseException) -> str:
    """Why FastAPI could not parse a body (it reports every such case as one 400 without a reason)."""
    cause = exc.__cause__
    if isinstance(cause, UnicodeError):
        return "request body is not valid JSON: it is not UTF-8"
    if isinstance(cause, RecursionError):
        return "request body is not valid JSON: it is nested too deeply"
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        # Valid JSON that Python refuses to read: an integer literal of more than 4,300 digits.
        return "request body holds an integer of more than 4,300 digits, which Vela does not read"
    return "request body is not valid JSON"


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if err.get("type") == "json_invalid":
        return "request body is not valid JSON"
    return f"{loc}: {msg}" if loc else msg


def _loc(err: dict[str, Any]) -> list[Any]:
    """Where the fault is; none for a body that is not JSON at all (pydantic gives the character's position)."""
    return [] if err.get("type") == "json_invalid" else list(err.get("loc", ()))


def _whole_body(err: dict[str, Any]) -> bool:
    return tuple(err.get("loc", ())) == ("body",) and err.get("type") in ("dict_type", "model_attributes_type")


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed(request: Request) -> str:
    """Every method some route serves at this path: Starlette's 405 names only the first route that matched the
    path (GET /collections/{name} would hide DELETE)."""
    routes = request.app.router.routes
    allowed = [m for m in _METHODS if any(r.matches({**request.scope, "method": m})[0] == Match.FULL for r in routes)]
    return ", ".join(allowed)


def timeout_message(timeout_s: float) -> str:
    """The message of a 503 `timeout`: the request passed VELA_REQUEST_TIMEOUT_S."""
    return (
        f"the request took longer than {timeout_s:g} s (VELA_REQUEST_TIMEOUT_S): ask for less (smaller k, depth, "
        "batch; declare the metadata fields that filters name); a transfer goes on past it only while it keeps moving"
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        details = [{"loc": _loc(e), "msg": _describe(e), "type": e.get("type")} for e in errors]
        sent = request.headers.get("content-type", "")
        if sent.split(";")[0].strip().lower() != "application/json" and any(_whole_body(e) for e in errors):
            # FastAPI reads a body it is not told is JSON as a string: "Input should be a valid dictionary"
            why = f"got {sent.split(';')[0].strip()!r}" if sent else "none was sent"
            message = f"the body must be JSON sent with Content-Type: application/json ({why})"
            return error_response(
                422, "invalid_request", message, [{"loc": ["body"], "msg": message, "type": "content_type"}]
            )
        message = "; ".join(d["msg"] for d in details[:5]) or "invalid request"
        return error_response(422, "invalid_request", message, details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI's "error parsing the body" (not UTF-8, JSON nested past the parser's recursion limit): one
            # malformed body is one kind of error, the same 422 as JSON with a syntax error (and the same type).
            message = _unparsable(exc)
            return error_response(
                422, "invalid_request", message, [{"loc": [], "msg": message, "type": "json_invalid"}]
            )
        code = getattr(exc, "code", None) or STATUS_CODES.get(exc.status_code, "error")
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": _allowed(request)}
        return error_response(exc.status_code, code, str(exc.detail), headers=headers)

    @app.exception_handler(QueueUnavailable)
    async def _queue_unavailable(_: Request, exc: QueueUnavailable) -> JSONResponse:
        # Every write that queues a job ends here when Redis is away: the job is already failed (never run
        # later), so the client sends the request again; the Python client retries a 503 after Retry-After.
        headers = {"Retry-After": str(exc.retry_after_s)}
        return error_response(503, "queue_unavailable", str(exc), headers=headers)

    @app.exception_handler(DiskFull)
    async def _disk_full(_: Request, exc: DiskFull) -> JSONResponse:
        # Not a 503: waiting frees no disk, so clients must not retry it as they retry a 503.
        return error_response(507, "insufficient_storage", str(exc))

    @app.exception_handler(JobStoreMoved)
    async def _job_store_moved(_: Request, exc: JobStoreMoved) -> JSONResponse:
        # Refused rather than recorded in a file no restart would read (searches go on; /readyz says so).
        return error_response(503, "unavailable", str(exc))

    @app.exception_handler(ModelUnavailable)
    async def _model_unavailable(_: Request, exc: ModelUnavailable) -> JSONResponse:
        # A write to a collection whose model folder is gone (`vela models remove --force`): refused up front.
        return error_response(409, "model_unavailable", str(exc))

    @app.exception_handler(QueueFull)
    async def _queue_full(_: Request, exc: QueueFull) -> JSONResponse:
        return error_response(503, "queue_full", str(exc), headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(DeadlineExceeded)
    async def _deadline(request: Request, exc: DeadlineExceeded) -> JSONResponse:
        # The engine stopped at the request's deadline (VELA_REQUEST_TIMEOUT_S): the request guard answers the same
        # 503 at that moment, and whichever comes first is what the client gets.
        return error_response(503, "timeout", timeout_message(request.app.state.vela.settings.request_timeout_s))

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
        # Last resort, in Starlette's outermost layer: the request guard middleware normally answers first.
        log.error("unhandled error", exc_info=exc, extra={"request_id": REQUEST_ID.get(), "path": request.url.path})
        state = getattr(request.app.state, "vela", None)
        return internal_error(exc, state.settings.data_dir if state is not None else None)


def parse_request_filter(raw: Any, schema: dict[str, Any], path: str = "filter") -> Node | None:
    """A request's filter, parsed against the collection's schema; 422 invalid_filter naming the fault's path."""
    try:
        return parse_filter(raw, Schema.from_json(schema), path)
    except FilterError as exc:
        raise ApiError(422, "invalid_filter", str(exc)) from exc
