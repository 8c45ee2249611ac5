"""A hybrid hit's `ranks` are its ranks in the lists the fusion read, each cut at `depth`: a rank past the cut
is shown as absent (null), as it counted for nothing in the score; RRF scores then follow from the ranks shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

DOCS = [
    {"id": f"d{i}", "text": f"note {i}: {' '.join(['cells', 'division', 'cancer', 'tides', 'moon'][: 1 + i % 5])}"}
    for i in range(30)
]


@pytest.mark.parametrize("group_by_doc", [True, False])
def test_ranks_past_depth_are_absent_and_rrf_scores_follow_the_ranks(
    server: httpx.Client, index_docs: Callable[..., dict[str, Any]], group_by_doc: bool
) -> None:
    notes = "hybrid_ranks"
    index_docs(notes, DOCS)  # the second time, an upsert that changes nothing
    depth = 8
    body = {
        "collection": notes, "query": "cell division in cancer", "mode": "hybrid", "fusion": {"method": "rrf"},
        "depth": depth, "k": depth, "group_by_doc": group_by_doc,
    }  # fmt: skip
    r = server.post("/search", json=body)
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert len(hits) == depth
    assert any(None in hit["ranks"].values() for hit in hits)  # a unit one list holds within depth, the other not
    for hit in hits:
        shown = [rank for rank in hit["ranks"].values() if rank is not None]
        assert shown and all(1 <= rank <= depth for rank in shown), hit["ranks"]
        assert hit["score"] == pytest.approx(sum(1 / (60 + rank) for rank in shown), rel=1e-6)


@pytest.mark.parametrize("method", ["dense", "bm25"])
def test_a_single_list_fusion_reads_its_list_to_depth_too(
    server: httpx.Client, index_docs: Callable[..., dict[str, Any]], method: str
) -> None:
    notes = "hybrid_ranks"
    index_docs(notes, DOCS)
    depth = 5
    body = {"collection": notes, "query": "cell division in cancer", "k": 20}
    alone = server.post("/search", json={**body, "mode": method})
    r = server.post(
        "/search", json={**body, "k": depth, "mode": "hybrid", "fusion": {"method": method}, "depth": depth}
    )
    assert alone.status_code == 200 and r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert [h["id"] for h in hits] == [h["id"] for h in alone.json()["hits"][:depth]]
    assert [h["ranks"][method] for h in hits] == list(range(1, depth + 1))


def test_a_page_past_an_explicit_depth_is_422_and_the_default_depth_reaches_the_page(
    server: httpx.Client, index_docs: Callable[..., dict[str, Any]]
) -> None:
    # Fusion reads each list to depth only: a page past it came back short, or empty, without a word.
    from service.search_requests import SearchRequest

    index_docs("hybrid_ranks", DOCS)
    body = {"collection": "hybrid_ranks", "query": "cell division in cancer", "mode": "hybrid"}
    for extra in ({"k": 10, "depth": 3}, {"k": 5, "offset": 10, "depth": 5}):
        r = server.post("/search", json={**body, **extra})
        assert r.status_code == 422, r.text
        assert "depth" in r.json()["error"]["message"] and "offset + k" in r.json()["error"]["message"]
    r = server.post("/search", json={**body, "k": 5, "offset": 10, "depth": 15})
    assert r.status_code == 200 and len(r.json()["hits"]) == 5
    for extra, depth in (({}, 200), ({"k": 300}, 300), ({"k": 150, "offset": 100}, 250), ({"mode": "dense"}, 200)):
        assert SearchRequest.model_validate({**body, **extra}).depth == depth, extra
