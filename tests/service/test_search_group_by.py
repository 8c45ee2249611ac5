"""`group_by` through HTTP: at most `size` hits per value of a metadata field, drawn from the best `depth` documents
of the same ranking (so a grouped page is the ungrouped list with the surplus of each value left out), on 1 and 3
shards, in every mode, in batches, with offsets, on nested and list-valued fields; refusals in the error shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.conftest import running_server, wait_job

TOPICS = ["tides and the moon", "insulin and sugar", "magma under the crust", "carbon in the air"]


def _docs() -> list[dict[str, Any]]:
    out = []
    for i in range(60):
        md: dict[str, Any] = {"source": f"site{i % 5}", "site": {"host": f"h{i % 3}"}}
        if i % 7 == 0:
            md["source"] = [f"site{i % 5}", "mirror"]  # in two groups
        if i % 11 == 0:
            del md["source"]  # a group of its own
        text = f"Page {i} on {TOPICS[i % 4]}, and a word on {TOPICS[(i * 3) % 4]}."
        out.append({"id": f"p{i:02d}", "text": text, "metadata": md})
    return out


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[httpx.Client]:
    with running_server(tmp_path_factory.mktemp("group-by"), embedder=str(tiny_embedder_dir)) as c:
        for name, shards in (("one", 1), ("three", 3)):
            r = c.post("/index", json={"collection": name, "documents": _docs(), "shards": shards})
            assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        r = c.post(
            "/index",
            json={
                "collection": "strict",
                "documents": _docs()[:5],
                "schema": {"fields": {"site.host": "keyword"}, "strict": True},
            },
        )
        assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        yield c


def _values(md: dict[str, Any], key: str) -> list[Any]:
    """The group values of a document by the documented rule, read directly (no flattening helper)."""
    value: Any = md
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, str | int | float | bool)]


def _expected(hits: list[dict[str, Any]], key: str, size: int) -> list[str]:
    held: dict[Any, int] = {}
    kept = []
    for h in hits:
        values = _values(h["metadata"], key)
        if any(held.get(v, 0) >= size for v in values):  # no group passes size
            continue
        for v in values:
            held[v] = held.get(v, 0) + 1
        kept.append(h["id"])
    return kept


def _search(c: httpx.Client, **body: Any) -> list[dict[str, Any]]:
    r = c.post("/search", json={"query": "moon tides sugar", **body})
    assert r.status_code == 200, r.text
    return list(r.json()["hits"])


@pytest.mark.parametrize("collection", ["one", "three"])
@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_a_grouped_page_is_the_ranking_with_each_values_surplus_left_out(
    client: httpx.Client, collection: str, mode: str
) -> None:
    full = _search(client, collection=collection, mode=mode, k=60)
    for key, size in (("source", 1), ("source", 2), ("site.host", 1), ("site.host", 3), ("absent", 1)):
        want = _expected(full, key, size)
        got = _search(client, collection=collection, mode=mode, k=10, group_by={"key": key, "size": size})
        assert [h["id"] for h in got] == want[:10], (key, size)
        page = _search(client, collection=collection, mode=mode, k=4, offset=3, group_by={"key": key, "size": size})
        assert [h["id"] for h in page] == want[3:7], (key, size)
    distinct = _search(client, collection=collection, mode=mode, k=10, group_by={"key": "site.host"})
    assert len(distinct) == 3  # three hosts: fewer than k hits
    narrow = _search(client, collection=collection, mode=mode, k=5, group_by={"key": "source", "depth": 5})
    assert [h["id"] for h in narrow] == _expected(full[:5], "source", 1)  # drawn from the best 5 alone


def test_a_batch_groups_each_query_and_qdrant_spelling_is_taken(client: httpx.Client) -> None:
    body = {"collection": "three", "queries": ["moon tides", "carbon air"], "k": 5, "group_by": {"key": "site.host"}}
    r = client.post("/search/batch", json=body)
    assert r.status_code == 200, r.text
    for result in r.json()["results"]:
        hosts = [h["metadata"]["site"]["host"] for h in result["hits"]]
        assert sorted(hosts) == ["h0", "h1", "h2"]
    same = client.post("/search/batch", json={**body, "group_by": {"key": "site[].host"}})
    assert same.json()["results"] == r.json()["results"] or all(
        [h["id"] for h in a["hits"]] == [h["id"] for h in b["hits"]]
        for a, b in zip(same.json()["results"], r.json()["results"], strict=True)
    )


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"collection": "one", "group_by": {"key": ""}}, 422, "invalid_request"),
        ({"collection": "one", "group_by": {"key": "source", "size": 0}}, 422, "invalid_request"),
        ({"collection": "one", "group_by": {"key": "source", "depth": 1001}}, 422, "invalid_request"),
        ({"collection": "one", "k": 5, "offset": 1, "group_by": {"key": "source", "depth": 5}}, 422, "invalid_request"),
        ({"collection": "one", "group_by": {"key": "source", "extra": 1}}, 422, "invalid_request"),
        ({"collection": "strict", "group_by": {"key": "source"}}, 422, "invalid_request"),  # not declared
        ({"collection": "one", "k": 1000, "group_by": {"key": "source"}}, 200, None),  # depth: the page itself
    ],
)
def test_refusals(client: httpx.Client, body: dict[str, Any], status: int, code: str | None) -> None:
    r = client.post("/search", json={"query": "moon", **body})
    assert r.status_code == status, r.text
    if code is not None:
        assert set(r.json()) == {"error"} and r.json()["error"]["code"] == code
    ok = client.post("/search", json={"query": "moon", "collection": "strict", "group_by": {"key": "site.host"}})
    assert ok.status_code == 200, ok.text


def test_the_documents_groups_are_drawn_from_count_against_the_hit_limit(
    tmp_path: Path, tiny_embedder_dir: Path
) -> None:
    with running_server(tmp_path, embedder=str(tiny_embedder_dir), max_search_hits=500) as c:
        r = c.post("/index", json={"collection": "c", "documents": _docs()[:5]})
        assert wait_job(c, r.json()["job_id"])["status"] == "succeeded"
        body = {"collection": "c", "queries": ["moon"] * 3, "k": 5, "group_by": {"key": "source", "depth": 200}}
        over = c.post("/search/batch", json=body)
        assert over.status_code == 413, over.text
        assert "group_by.depth x queries, is 600" in over.json()["error"]["message"]
        assert c.post("/search/batch", json={**body, "queries": ["moon"] * 2}).status_code == 200


def test_the_documents_drawn_from_deepen_the_hybrid_fusion() -> None:
    """Hybrid fuses each list to `depth`: the groups' documents must come from that deep, or a page comes back
    short on a collection larger than the fused lists."""
    from pydantic import ValidationError

    from service.search_requests import SearchRequest

    def req(**body: Any) -> SearchRequest:
        return SearchRequest.model_validate({"collection": "c", "query": "q", **body})

    grouped = req(k=37, offset=40, group_by={"key": "cat"})
    assert grouped.group_by is not None and (grouped.group_by.depth, grouped.depth) == (770, 770)
    assert req(k=10, group_by={"key": "cat"}).depth == 200  # 100 documents drawn from a 200-deep fusion
    capped = req(k=10, depth=150, group_by={"key": "cat"})
    assert capped.group_by is not None and capped.group_by.depth == 100
    within = req(k=10, depth=50, group_by={"key": "cat"})  # an explicit fusion depth bounds the default
    assert within.group_by is not None and within.group_by.depth == 50
    assert req(mode="dense", k=10, group_by={"key": "cat", "depth": 900}).group_by.depth == 900  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match=r"below group_by.depth \(500\)"):
        req(k=10, depth=300, group_by={"key": "cat", "depth": 500})


def test_a_document_in_several_groups_is_left_out_once_one_is_full() -> None:
    from service.grouping import GroupSpec, grouped

    class H:
        def __init__(self, name: str, t: Any) -> None:
            self.name, self.metadata = name, {"t": t}

    hits = [H("A", ["a"]), H("B", ["a", "b"]), H("C", ["b", "a"]), H("D", "b"), H("E", None), H("F", 1), H("G", 1.0)]
    assert [h.name for h in grouped(hits, GroupSpec("t", size=1), 7)] == ["A", "D", "E", "F"]
    assert [h.name for h in grouped(hits, GroupSpec("t", size=2), 7)] == ["A", "B", "D", "E", "F", "G"]
