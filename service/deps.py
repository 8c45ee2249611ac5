"""Request dependencies: the app state, and the API-key check."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from service.api_keys import key_check
from service.errors import ApiError
from service.state import AppState

_bearer = HTTPBearer(auto_error=False)
_header = APIKeyHeader(name="X-API-Key", auto_error=False)


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.vela
    return state


State = Annotated[AppState, Depends(get_state)]


def require_api_key(
    request: Request,
    state: State,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> None:
    """With API keys set, every resource route needs one of the keys (Bearer or X-API-Key); a read-only key
    (VELA_READ_API_KEYS) only on the routes that read.

    The `require_key` middleware has checked already, before the body was read; this dependency declares the
    security schemes in the OpenAPI document (`bearer`, `header`) and is a second check, the same one, on the raw
    headers: FastAPI's schemes would read the first of two Authorization headers where the check reads the last."""
    settings = state.settings
    if not settings.auth_on:
        return
    refusal = key_check(
        request.scope,
        frozenset(k.encode("utf-8") for k in settings.api_key_set),
        frozenset(k.encode("utf-8") for k in settings.read_key_set),
    )
    if refusal is not None:
        raise ApiError(*refusal)
