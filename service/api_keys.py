"""API keys, checked on a request's headers before any body byte is read: `require_key` (the ASGI middleware) and
`key_check`, which the per-route dependency (service/deps.py) runs again. Keys of VELA_API_KEYS do everything; keys
of VELA_READ_API_KEYS only read; tokens signed with a key of VELA_API_KEYS reach what they grant."""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from service.access_tokens import ACCESS_STATE, FULL, READ_ONLY, TokenError, looks_like_token, scoped_refusal, verify
from service.errors import error_response

MISSING_KEY = "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key'"


def _given_key(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """X-API-Key, else the credentials of `Authorization: Bearer`, as the raw bytes the client sent (each header
    at most once: see key_refusal)."""
    bearer = None
    for name, value in headers:
        name = name.lower()
        if name == b"x-api-key" and value:
            return bytes(value)
        if name == b"authorization":
            scheme, _, credentials = bytes(value).partition(b" ")
            if scheme.lower() == b"bearer" and credentials.strip():
                bearer = credentials.strip()
    return bearer


def key_matches(given: bytes, keys: Iterable[bytes]) -> bool:
    # Bytes, not str: compare_digest refuses non-ASCII str (a 500), and a header is bytes on the wire anyway.
    return any(hmac.compare_digest(given, k) for k in keys)


def key_refusal(headers: Iterable[tuple[bytes, bytes]], keys: frozenset[bytes]) -> str | None:
    """Why a request's headers do not carry one of `keys` (the 401's message), or None when they do. The one
    check of the key middleware and of the per-route dependency: a request with two Authorization headers, or two
    X-API-Key headers, is refused (servers and proxies differ on which of two they take)."""
    headers = list(headers)
    for header, shown_as in ((b"authorization", "Authorization"), (b"x-api-key", "X-API-Key")):
        if sum(name.lower() == header for name, _ in headers) > 1:
            return f"more than one {shown_as} header: send one API key"
    given = _given_key(headers)
    if given is None:
        return MISSING_KEY
    return None if key_matches(given, keys) else "invalid API key"


# What a read-only key (VELA_READ_API_KEYS) may do besides GET and HEAD: the POSTs that only read.
_READ_POSTS = re.compile(r"/search|/search/batch|/recommend|/collections/[^/]+/(count|facet|documents)")
READ_ONLY_MESSAGE = (
    "this API key may only read (searches, counts, facets, recommendations, GETs): writing needs another key"
)


def key_check(scope: Scope, keys: frozenset[bytes], read_keys: frozenset[bytes]) -> tuple[int, str, str] | None:
    """The refusal (status, code, message) of a request under API keys, or None when its key lets it through: any
    key of `keys`, a key of `read_keys` on a request that only reads, or a token one of `keys` signed on a request
    its grant reaches (service/access_tokens.py). The access found is left in the request's state (`access_of`)."""
    refusal = key_refusal(scope["headers"], keys | read_keys)
    given = _given_key(scope["headers"]) or b""
    if refusal == "invalid API key" and looks_like_token(given):
        try:
            access = verify(given, keys)
        except TokenError as exc:
            return 401, "unauthorized", str(exc)
    elif refusal is not None:
        return 401, "unauthorized", refusal
    else:
        access = READ_ONLY if read_keys and not key_matches(given, keys) else FULL
    scope.setdefault("state", {})[ACCESS_STATE] = access
    method, path = scope.get("method", "GET"), scope["path"]
    if access.read_only:
        if method not in ("GET", "HEAD") and not (method == "POST" and _READ_POSTS.fullmatch(path)):
            return 403, "forbidden", READ_ONLY_MESSAGE
    elif access.grant is not None:
        denied = scoped_refusal(method, path, access.grant)
        if denied is not None:
            return 403, "forbidden", denied
    return None


def require_key(
    app: ASGIApp, *, keys: frozenset[str], read_keys: frozenset[str] = frozenset(), public: frozenset[str]
) -> ASGIApp:
    """With API keys set, every path outside `public` needs one (a read-only key, only to read). Checked on the
    headers alone, so an unauthenticated client cannot make the server read (and hold in memory) a body."""
    encoded = frozenset(k.encode("utf-8") for k in keys)
    encoded_read = frozenset(k.encode("utf-8") for k in read_keys)

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (encoded or encoded_read) and scope["path"] not in public:
            refusal = key_check(scope, encoded, encoded_read)
            if refusal is not None:
                await error_response(*refusal)(scope, receive, send)
                return
        await app(scope, receive, send)

    return middleware
