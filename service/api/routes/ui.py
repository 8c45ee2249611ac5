"""The web console at /ui: the static files of `service.ui`, served from the installed package.

The page and its assets hold no data, so they are public even with API keys on (the page asks for a key and
sends it with every API call it makes). They are left out of the OpenAPI document: they are not API operations.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import PurePosixPath

from fastapi import APIRouter, Response

from service.api.json_body import JsonRoute
from service.errors import ApiError

_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
_STATIC = files("service.ui").joinpath("static")
# The files served: those the package ships in service/ui/static, listed once at import, so that no request path
# can name anything else.
ASSETS = {
    f.name: _MEDIA_TYPES[PurePosixPath(f.name).suffix]
    for f in _STATIC.iterdir()
    if f.is_file() and PurePosixPath(f.name).suffix in _MEDIA_TYPES
}
PUBLIC_PATHS = frozenset({"/ui", "/ui/", *(f"/ui/{name}" for name in ASSETS)})

# Everything the page loads comes from this server; no inline script or style, no framing by other sites.
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidated on every load: a new version of the console is never mixed with an old cached script.
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False, route_class=JsonRoute)


@cache
def _read(name: str) -> bytes:
    return _STATIC.joinpath(name).read_bytes()


def _asset(name: str) -> Response:
    if name not in ASSETS:
        raise ApiError(404, "not_found", f"no console file named {name!r}")
    return Response(_read(name), media_type=ASSETS[name], headers=_HEADERS)


@router.get("/ui")
@router.get("/ui/")
def console() -> Response:
    """The console page."""
    return _asset("index.html")


@router.get("/ui/{name}")
def console_asset(name: str) -> Response:
    """One of the console's scripts or style sheets."""
    return _asset(name)
