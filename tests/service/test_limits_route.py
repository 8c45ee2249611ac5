"""GET /limits reports the bounds the server enforces, as set, behind the API key like every resource route; a
JSON body of exactly the `max_json_bytes` it reports is taken and one byte more is refused, so a client that sizes
its requests by it never meets a 413."""

from __future__ import annotations

import json
from pathlib import Path

from tests.service.conftest import running_app, wait_job

KEY = "limits-key"


def _index_body(size: int) -> bytes:
    """A one-document POST /index body of exactly `size` bytes (its text pads it)."""
    body = {"collection": "fits", "documents": [{"id": "a", "text": ""}]}
    empty = len(json.dumps(body, separators=(",", ":")))
    body["documents"][0]["text"] = "o" * (size - empty)
    raw = json.dumps(body, separators=(",", ":")).encode()
    assert len(raw) == size
    return raw


def test_limits_are_the_settings_in_force_behind_the_key(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    settings = {
        "api_keys": KEY,
        "embedder": str(tiny_embedder_dir),
        "max_json_bytes": 4096,
        "max_batch_documents": 7,
        "max_batch_queries": 9,
        "max_metadata_values": 500,
        "max_aliases": 3,
    }
    with running_app(tmp_path, **settings) as (client, _):
        assert client.get("/limits").status_code == 401
        client.headers["X-API-Key"] = KEY
        limits = client.get("/limits").json()
        assert (limits["max_json_bytes"], limits["max_batch_documents"]) == (4096, 7)
        assert (limits["max_document_bytes"], limits["max_batch_queries"]) == (1_000_000, 9)
        assert limits["max_request_bytes"] == 256 * 1024 * 1024
        assert (limits["max_metadata_keys"], limits["max_metadata_values"]) == (1000, 500)
        assert (limits["max_aliases"], limits["max_filter_ids"], limits["max_get_documents"]) == (3, 10_000, 1000)

        headers = {"Content-Type": "application/json"}
        over = client.post("/index", content=_index_body(limits["max_json_bytes"] + 1), headers=headers)
        assert over.status_code == 413 and "VELA_MAX_JSON_BYTES" in over.json()["error"]["message"]
        whole = client.post("/index", content=_index_body(limits["max_json_bytes"]), headers=headers)
        assert whole.status_code == 202, whole.text
        assert wait_job(client, whole.json()["job_id"])["status"] == "succeeded"


def test_a_json_limit_above_the_request_limit_reports_the_lower(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    """The body limit of JSON routes is the lower of the two settings (the middleware's rule)."""
    settings = {"embedder": str(tiny_embedder_dir), "max_request_bytes": 2048, "max_json_bytes": 1 << 20}
    with running_app(tmp_path, **settings) as (client, _):
        assert client.get("/limits").json()["max_json_bytes"] == 2048


def test_highlighted_hits_have_a_lower_bound_reported_in_limits(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    """(k + offset) x queries is bounded by VELA_MAX_HIGHLIGHT_HITS when highlights are asked for, refused (413)
    before any search runs; the same request without highlights is taken."""
    with running_app(tmp_path, embedder=str(tiny_embedder_dir), max_highlight_hits=5) as (client, _):
        assert client.get("/limits").json()["max_highlight_hits"] == 5
        r = client.post("/index", json={"collection": "h", "documents": [{"id": "a", "text": "moon tides"}]})
        assert wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        body = {"collection": "h", "queries": ["moon", "tides"], "k": 2, "offset": 1, "mode": "bm25"}
        over = client.post("/search/batch", json={**body, "highlight": True})
        assert over.status_code == 413 and over.json()["error"]["code"] == "payload_too_large"
        assert over.json()["error"]["message"].startswith("hits to highlight, (k + offset) x queries, is 6; the limit")
        assert "VELA_MAX_HIGHLIGHT_HITS" in over.json()["error"]["message"]
        one = client.post("/search", json={"collection": "h", "query": "moon", "k": 5, "highlight": True})
        assert one.status_code == 200 and one.json()["hits"][0]["highlights"] == [[0, 4]]
        assert client.post("/search/batch", json=body).status_code == 200
