"""The client covers every operation the API publishes: a route added to the server without a client method fails
here (add it in vela_client/routes.py, vela_client/calls.py and both clients)."""

from __future__ import annotations

import httpx
from vela_client import AsyncVelaClient, VelaClient
from vela_client.routes import ROUTES


def test_every_api_operation_has_a_client_route(vela_url: str) -> None:
    schema = httpx.get(f"{vela_url}/openapi.json").json()
    published = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    covered = {(r.method, r.path) for r in ROUTES}
    assert published - covered == set(), f"API operations the client does not cover: {sorted(published - covered)}"
    assert covered - published == set(), f"client routes the API does not have: {sorted(covered - published)}"


def test_both_clients_have_the_same_methods() -> None:
    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_")}

    assert public(VelaClient) - {"close"} == public(AsyncVelaClient) - {"aclose"}
