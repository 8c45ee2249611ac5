"""The OpenAPI document says the error shape the server sends: every 422 is an `ErrorResponse`.

FastAPI adds a 422 to each operation with parameters or a body that does not declare one, with its own
`HTTPValidationError` (`{"detail": [...]}`), a shape this server never sends (service/errors.py answers every
error as `{"error": {...}}`). Rather than declare 422 on every route, the generated document is rewritten once:
those 422s reference `ErrorResponse`, and FastAPI's two validation schemas, then unused, are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from service.schemas import ErrorResponse

REF = "#/components/schemas/"
ERROR_MODEL = ErrorResponse.__name__
FASTAPI_VALIDATION = ("HTTPValidationError", "ValidationError")  # FastAPI's default 422 body and its items


def _error_components() -> dict[str, Any]:
    """The error model and the models it references, as component schemas."""
    schema = ErrorResponse.model_json_schema(ref_template=REF + "{model}")
    components: dict[str, Any] = schema.pop("$defs", {})
    components[ERROR_MODEL] = schema
    return components


def _referenced(value: Any, name: str) -> bool:
    return f'"{REF}{name}"' in json.dumps(value)


def _error_422() -> dict[str, Any]:
    return {
        "description": "Unprocessable Entity",
        "content": {"application/json": {"schema": {"$ref": REF + ERROR_MODEL}}},
    }


def use_error_model_for_422(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with every 422 that references FastAPI's HTTPValidationError referencing the error model instead
    (rewritten in place, and returned); FastAPI's validation schemas are removed once nothing references them."""
    schemas: dict[str, Any] = spec.setdefault("components", {}).setdefault("schemas", {})
    rewritten = False
    for operations in spec.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            if "422" in responses and _referenced(responses["422"], FASTAPI_VALIDATION[0]):
                responses["422"] = _error_422()
                rewritten = True
    if rewritten:
        for name, schema in _error_components().items():
            schemas.setdefault(name, schema)
    for name in FASTAPI_VALIDATION:  # HTTPValidationError first: it is what references ValidationError
        if name in schemas:
            schema = schemas.pop(name)
            if _referenced(spec, name):  # still used by something else: kept
                schemas[name] = schema
    return spec


# Answers any operation may give, from the request guard and the limits rather than from its own code
# (docs/api.md, Errors): declared on every operation that does not declare its own.
_BODY_ERRORS = {
    "408": "request_timeout: the request body did not arrive in time (VELA_BODY_TIMEOUT_S)",
    "413": "payload_too_large: the body is over VELA_MAX_JSON_BYTES, or the work asked for over a limit",
}
_ANY_ERRORS = {
    # A declared Content-Length over the limit, or a declared content coding, is refused on any route, a GET's
    # included, before the body is read.
    "413": "payload_too_large: a declared body over VELA_MAX_JSON_BYTES (refused before it is read)",
    "415": "unsupported_encoding: a Content-Encoding other than identity (the server decodes none)",
    "500": "internal: an unexpected error, logged with the request id (never a traceback in the answer)",
    "503": "unavailable, not_ready or timeout: the server is starting, overloaded or past its deadline",
}


# A job is refused before anything of it is stored when the disk is (nearly) full (service/capacity.py).
_JOB_ERRORS = {
    "507": "insufficient_storage: the data directory's disk is below VELA_MIN_FREE_DISK_MB, or filled during the "
    "request: nothing was stored",
}
# A search embeds its query with the collection's model, which may no longer load (docs/api.md, Errors).
_SEARCH_ERRORS = {"409": "model_unavailable: the collection's model does not load on this server (bm25 still answers)"}
_SEARCH_PATHS = ("/search", "/search/batch")
# A write's job runs the collection's writer, which loads its model: one whose model no longer loads is refused
# before anything is queued (service/documents.py check_model), rather than failing after its 202.
_WRITE_ERRORS = {"409": "model_unavailable: the collection's model does not load on this server: nothing was queued"}
_WRITE_OPERATIONS = {
    ("/index", "post"),
    ("/collections/{name}/documents/{doc_id}", "patch"),
    ("/collections/{name}/documents/{doc_id}", "delete"),
    ("/collections/{name}/delete", "post"),
    ("/collections/{name}/schema", "put"),
}


def declare_common_errors(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with 408 and 413 on every operation that takes a body, 507 on every one that queues a job (a 202),
    409 on the searches and the writes, and 413, 415, 500 and 503 on every operation, where missing; an error
    response declared without a body gets the error model. (414 and 431 come before any route is matched:
    docs/api.md lists them.)"""
    for path, operations in spec.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            common = {
                **_ANY_ERRORS,
                **(_BODY_ERRORS if "requestBody" in operation else {}),
                **(_JOB_ERRORS if "202" in responses else {}),
                **(_SEARCH_ERRORS if path in _SEARCH_PATHS else {}),
                **(_WRITE_ERRORS if (path, method) in _WRITE_OPERATIONS else {}),
            }
            for status, description in common.items():
                if status not in responses:
                    responses[status] = {**_error_422(), "description": description}
            for status, response in responses.items():
                if status >= "400" and "content" not in response:  # e.g. /readyz's 503: it is in the error shape
                    response["content"] = _error_422()["content"]
    return spec


def install_openapi(app: FastAPI) -> None:
    """Serve the rewritten document at /openapi.json (and to /docs, /redoc): FastAPI's documented way to change the
    generated schema is to replace `app.openapi` (https://fastapi.tiangolo.com/how-to/extending-openapi/)."""
    generate: Callable[[], dict[str, Any]] = app.openapi
    # The document last rewritten: FastAPI caches it, and generates a new one when the routes change.
    last: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        spec = generate()
        if not last or last[0] is not spec:
            last[:] = [declare_common_errors(use_error_model_for_422(spec))]
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
