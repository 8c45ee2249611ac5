"""Every request that writes documents in a batch refuses one over VELA_MAX_BATCH_DOCUMENTS (413) with the same
message, naming the limit and the setting: /index and the delete of many documents by ids."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import running_app
from tests.service.document_helpers import index

MESSAGE = "4 documents in one request; the limit is 3 (VELA_MAX_BATCH_DOCUMENTS): split the batch"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    data = tmp_path_factory.mktemp("vela-batch")
    with running_app(data, embedder=str(tiny_embedder_dir), max_batch_documents=3) as (client, _app):
        index(client, "notes", [{"id": "a", "text": "the tides"}])
        yield client


def _refusal(r: httpx.Response) -> str:
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["code"] == "payload_too_large"
    return str(error["message"])


def test_index_and_delete_by_ids_refuse_a_batch_over_the_limit_alike(server: httpx.Client) -> None:
    docs = [{"id": f"d{i}", "text": "t"} for i in range(4)]
    assert _refusal(server.post("/index", json={"collection": "notes", "documents": docs})) == MESSAGE
    ids = ["a", "b", "c", "d", "a"]  # repeats counted once
    assert _refusal(server.post("/collections/notes/delete", json={"ids": ids})) == MESSAGE
    assert server.get("/collections/notes").json()["documents"] == 1  # nothing written, nothing deleted


def test_a_batch_at_the_limit_is_accepted(server: httpx.Client) -> None:
    r = server.post("/collections/notes/delete", json={"ids": ["x", "y", "z", "x"]})
    assert r.status_code == 202, r.text
