"""Request dependencies: the app state, and the API-key check."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from service.errors import ApiError
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
    """With VELA_API_KEYS set, every resource route needs one of the keys (Bearer or X-API-Key)."""
    keys = state.settings.api_key_set
    if not keys:
        return
    given = header or (bearer.credentials if bearer else None)
    if given is None:
        raise ApiError(401, "unauthorized", "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key'")
    if not any(secrets.compare_digest(given, k) for k in keys):
        raise ApiError(401, "unauthorized", "invalid API key")
