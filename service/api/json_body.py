"""The route class of every API route: the one place a request's JSON body is decoded, as UTF-8 and nothing else.

Starlette hands `json.loads` the body's bytes, and `json.loads` guesses their encoding: a body in UTF-16 or UTF-32
was read, although the API takes UTF-8 only. Here the bytes are decoded as UTF-8 first (a leading byte order mark is
skipped), so any other encoding fails as a body that is not UTF-8 does (one without a byte order mark, by its NUL
bytes): 422 `invalid_request`, "not UTF-8" (service/errors.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute


class Utf8JsonRequest(Request):
    """A request whose JSON body must be UTF-8."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if b"\x00" in body[:4]:
                # UTF-16 or UTF-32 without a byte order mark: NUL is UTF-8, but never in a JSON text's first
                # characters (json.loads takes it as the sign of those encodings)
                raise UnicodeDecodeError("utf-8", body[:4], body.index(b"\x00"), 4, "UTF-16 or UTF-32, not UTF-8")
            # Strict UTF-8 (json.loads on bytes decodes with surrogatepass, and detects UTF-16 and UTF-32).
            self._json = json.loads(body.decode("utf-8-sig"))
        return self._json


class JsonRoute(APIRoute):
    """FastAPI's route, reading the body through `Utf8JsonRequest` (every router passes it as `route_class`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def utf8_handler(request: Request) -> Response:
            return await handler(Utf8JsonRequest(request.scope, request.receive))

        return utf8_handler
