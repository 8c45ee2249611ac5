"""A search answers only the parts of each hit asked for: `with_text` false leaves the passage text out (empty),
`with_metadata` false or a list of keys leaves out all or the other keys; hits, scores and order are the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.conftest import running_server, wait_job


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("projection"), embedder=str(tiny_embedder_dir)) as c:
        docs = [
            {
                "id": f"d{i}",
                "text": f"tides and the moon, note {i}",
                "metadata": {"tenant": f"t{i % 2}", "n": i, "author": {"name": f"a{i}", "born": 1900 + i}},
            }
            for i in range(6)
        ]
        r = c.post("/index", json={"collection": "p", "documents": docs})
        assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        yield c


def _hits(c: httpx.Client, **extra: Any) -> list[dict[str, Any]]:
    r = c.post("/search", json={"collection": "p", "query": "moon tides", "k": 6, **extra})
    assert r.status_code == 200, r.text
    return list(r.json()["hits"])


def test_left_out_parts_are_empty_and_the_ranking_is_the_same(client: httpx.Client) -> None:
    full = _hits(client, highlight=True)
    bare = _hits(client, highlight=True, with_text=False, with_metadata=False)
    some = _hits(client, with_metadata=["n", "absent"])
    assert [(h["id"], h["score"]) for h in bare] == [(h["id"], h["score"]) for h in full]
    assert all(h["text"] == "" and h["metadata"] == {} for h in bare)
    assert [h["highlights"] for h in bare] == [h["highlights"] for h in full]  # offsets into the text left out
    assert [h["metadata"] for h in some] == [{"n": h["metadata"]["n"]} for h in full]
    assert all(h["text"] for h in some)
    nested = _hits(client, with_metadata=["author.name", "n"])  # a nested key, kept in its place
    assert [h["metadata"] for h in nested] == [
        {"n": h["metadata"]["n"], "author": {"name": h["metadata"]["author"]["name"]}} for h in full
    ]
    batch = client.post("/search/batch", json={"collection": "p", "queries": ["moon", "tides"], "with_text": False})
    assert batch.status_code == 200 and all(h["text"] == "" for r in batch.json()["results"] for h in r["hits"])


@pytest.mark.parametrize(
    "bad", [{"with_text": "no"}, {"with_metadata": [""]}, {"with_metadata": "n"}, {"with_metadata": [1]}]
)
def test_a_bad_projection_is_a_422(client: httpx.Client, bad: dict[str, Any]) -> None:
    r = client.post("/search", json={"collection": "p", "query": "moon", **bad})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
