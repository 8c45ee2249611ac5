"""Connection settings shared by the sync and async clients."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx

from vela_client.version import __version__

DEFAULT_URL = "http://127.0.0.1:8000"
# A little over the server's default request deadline (VELA_REQUEST_TIMEOUT_S, 60 s): a slow request then ends in
# the server's own 503 `timeout`, which says what to do, rather than in a client-side timeout.
DEFAULT_TIMEOUT_S = 75.0


def http_options(
    *,
    base_url: str | None,
    api_key: str | None,
    timeout: float | httpx.Timeout,
    headers: Mapping[str, str] | None,
    extra: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Keyword arguments of `httpx.Client` / `httpx.AsyncClient`.

    Unset `base_url` and `api_key` come from VELA_URL and VELA_API_KEY (then the local default, and no key), so
    that an application's code need not carry its deployment's address or secret. The key goes as
    `Authorization: Bearer`, which the API accepts beside `X-API-Key`."""
    if (
        timeout is not None
        and not isinstance(timeout, httpx.Timeout)
        and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0)
    ):
        raise ValueError(f"timeout must be a number of seconds above 0 (or an httpx.Timeout), not {timeout!r}")
    url = base_url or os.environ.get("VELA_URL") or DEFAULT_URL
    check_url(url, "base_url" if base_url else "VELA_URL" if os.environ.get("VELA_URL") else "the default URL")
    key = api_key if api_key is not None else os.environ.get("VELA_API_KEY")
    if key:
        check_api_key(key, "api_key" if api_key is not None else "VELA_API_KEY")
    sent = {"User-Agent": f"vela-client/{__version__} httpx/{httpx.__version__}", "Accept": "application/json"}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    sent.update(headers or {})
    return {
        "base_url": url,
        "headers": sent,
        "timeout": timeout,
        **(extra or {}),
    }


def check_api_key(key: str, source: str) -> None:
    """A key a header can carry as it is: printable ASCII, no space at either end. A key read from a file often ends
    in a newline, which would otherwise fail every call as a bad header (and httpx's message shows the key)."""
    if key != key.strip():
        raise ValueError(f"{source}: the API key has a space or line break at one end (read from a file?)")
    if not all(" " <= c <= "~" for c in key):
        raise ValueError(f"{source}: the API key holds characters a header cannot carry (printable ASCII only)")


def check_url(url: str, source: str) -> None:
    """A server address is http(s)://host[:port][/prefix]: `localhost:8000` alone would be read as a URL of scheme
    `localhost` and fail at the first call as a connection failure, which it is not."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as e:
        raise ValueError(f"{source}: {url!r} is not a URL: {e}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        hint = f" (did you mean 'http://{url}'?)" if "://" not in url else ""
        raise ValueError(f"{source}: {url!r} is not an http:// or https:// URL with a host{hint}")
