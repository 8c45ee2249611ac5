"""Read-only API keys (VELA_READ_API_KEYS) over real HTTP: such a key searches, counts, facets, recommends and reads
every GET route; every write is a 403 in the error shape, before its body is read, and changes nothing. A key of
VELA_API_KEYS does everything; a key in both lists is refused at start-up."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from service.settings import Settings
from tests.service.conftest import running_server, wait_job

ADMIN = {"X-API-Key": "admin-key"}
READER = {"Authorization": "Bearer reader-key"}
DOCS = [{"id": f"d{i}", "text": f"tides and currents {i}", "metadata": {"n": i}} for i in range(6)]


def test_a_read_key_reads_and_cannot_write(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    with running_server(
        tmp_path, embedder=str(tiny_embedder_dir), api_keys="admin-key", read_api_keys="reader-key"
    ) as client:
        r = client.post("/index", json={"collection": "c", "documents": DOCS}, headers=ADMIN)
        assert r.status_code == 202 and wait_job_as(client, r.json()["job_id"])["status"] == "succeeded"

        reads = [
            client.post("/search", json={"collection": "c", "query": "tides"}, headers=READER),
            client.post("/search/batch", json={"collection": "c", "queries": ["tides"]}, headers=READER),
            client.post("/recommend", json={"collection": "c", "like": ["d1"]}, headers=READER),
            client.post("/collections/c/count", json={}, headers=READER),
            client.get("/collections/c", headers=READER),
            client.get("/collections/c/documents/d1", headers=READER),
            client.post("/collections/c/documents", json={"ids": ["d1"]}, headers=READER),
            client.get("/limits", headers=READER),
        ]
        assert [r.status_code for r in reads] == [200] * len(reads), [r.text for r in reads if r.status_code != 200]
        facet = client.post("/collections/c/facet", json={"key": "n"}, headers=READER)  # past the key check:
        assert facet.json()["error"]["code"] == "invalid_facet"  # refused for the undeclared field, not the key

        writes = [
            client.post("/index", json={"collection": "c", "documents": [{"id": "x", "text": "x"}]}, headers=READER),
            client.patch("/collections/c/documents/d1", json={"metadata": {"n": 99}}, headers=READER),
            client.delete("/collections/c/documents/d1", headers=READER),
            client.post("/collections/c/delete", json={"ids": ["d2"]}, headers=READER),
            client.delete("/collections/c", headers=READER),
            client.put("/aliases/live", json={"collection": "c"}, headers=READER),
            client.post("/collections/c/snapshots", headers=READER),
        ]
        for w in writes:
            assert w.status_code == 403, w.text
            assert w.json()["error"]["code"] == "forbidden" and "only read" in w.json()["error"]["message"]
        assert client.get("/collections/c", headers=ADMIN).json()["documents"] == len(DOCS)  # nothing changed
        assert client.get("/collections/c/documents/d1", headers=ADMIN).json()["metadata"] == {"n": 1}

        assert client.post("/search", json={"collection": "c", "query": "x"}).status_code == 401
        bad = client.post("/search", json={"collection": "c", "query": "x"}, headers={"X-API-Key": "nope"})
        assert bad.status_code == 401 and bad.json()["error"]["message"] == "invalid API key"
        assert client.delete("/collections/c/documents/d1", headers=ADMIN).status_code == 202


def wait_job_as(client: httpx.Client, job_id: str) -> dict[str, object]:
    """wait_job, with the admin key on every poll."""
    client.headers.update(ADMIN)
    try:
        return wait_job(client, job_id)
    finally:
        del client.headers["X-API-Key"]


def test_a_key_of_both_kinds_is_refused() -> None:
    with pytest.raises(ValidationError, match="both VELA_API_KEYS and VELA_READ_API_KEYS"):
        Settings(api_keys="a,b", read_api_keys="b")
    assert Settings(read_api_keys="r").auth_on and not Settings().auth_on
