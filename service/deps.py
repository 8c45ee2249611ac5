"""Request dependencies: the app state, and the API-key check."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from service.errors import ApiError
from service.middleware import key_matches
from service.state import AppState

_bearer = HTTPBearer(auto_error=False)
_header = APIKeyHeader(name="X-API-Key", auto_error=False)


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.vela
    return state


State = Annotated[AppState, Depends(get_state)]


def require_api_key(
    state: State,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> None:
    """With VELA_API_KEYS set, every resource route needs one of the keys (Bearer or X-API-Key).

    The `require_key` middleware has checked already, before the body was read; this dependency declares the
    security schemes in the OpenAPI document and is a second check."""
    keys = state.settings.api_key_set
    if not keys:
        return
    given = header or (bearer.credentials if bearer else None)
    if given is None:
        raise ApiError(401, "unauthorized", "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key'")
    # Starlette decodes header values as latin-1: encoding back gives the bytes the client sent.
    if not key_matches(given.encode("latin-1"), (k.encode("utf-8") for k in keys)):
        raise ApiError(401, "unauthorized", "invalid API key")
