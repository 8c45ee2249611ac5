"""Requests answered before the router sees them are counted under their route's template, not as unmatched."""

from __future__ import annotations

from pathlib import Path

from tests.service.conftest import running_server


def test_refused_requests_keep_their_route_label(tmp_path: Path) -> None:
    with running_server(tmp_path, api_keys="k1") as client:
        assert client.get("/collections/notes/documents/a%2Fb").status_code == 401  # the key check answers
        assert client.get("/no/such/route", headers={"X-API-Key": "k1"}).status_code == 404
        text = client.get("/metrics").text
    documents = 'route="/collections/{name}/documents/{doc_id:doc_id}",status="401"'
    assert any(line.startswith("vela_http_requests_total") and documents in line for line in text.splitlines())
    assert 'vela_http_requests_total{method="GET",route="unmatched",status="404"}' in text
    assert 'route="unmatched",status="401"' not in text
