"""The client covers every operation the API publishes: a route added to the server without a client method fails
here (add it in vela_client/routes.py, a vela_client/*calls.py module and both clients)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import vela_client
from vela_client import AsyncVelaClient, VelaClient, VelaError
from vela_client.routes import HEAD_ROUTES, ROUTES

ROOT = Path(__file__).resolve().parents[2]


def test_every_api_operation_has_a_client_route(vela_url: str) -> None:
    schema = httpx.get(f"{vela_url}/openapi.json").json()
    published = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    covered = {(r.method, r.path) for r in ROUTES}
    assert published - covered == set(), f"API operations the client does not cover: {sorted(published - covered)}"
    assert covered - published == set(), f"client routes the API does not have: {sorted(covered - published)}"
    # HEAD routes are kept out of the schema: each answers beside a published GET of the same path.
    assert {("GET", r.path) for r in HEAD_ROUTES} <= published


def test_both_clients_have_the_same_methods() -> None:
    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_")}

    assert public(VelaClient) - {"close"} == public(AsyncVelaClient) - {"aclose"}


@pytest.mark.parametrize("page", ["client/README.md", "docs/client.md"])
def test_the_docs_name_every_method_and_error(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    methods = {n for n in dir(VelaClient) if not n.startswith("_")} - {"base_url", "close"}
    assert sorted(n for n in methods if f"`{n}" not in text) == []
    errors = [
        n for n in vela_client.__all__ if isinstance(c := getattr(vela_client, n), type) and issubclass(c, VelaError)
    ]
    assert sorted(n for n in errors if f"`{n}`" not in text) == []
