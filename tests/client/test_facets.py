"""`facet` and `recommend` through both clients against a real server: the most frequent values of a declared
field under a filter, typed; documents like stored ones; and their refusals as the right exceptions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from vela_client import Facet, FacetHit, InvalidRequest, NotFound, VelaClient

from tests.client.conftest import API_KEY

DOCS = [
    {"id": f"d{i}", "text": f"note {i} about otters", "metadata": {"n": i, "tag": "odd" if i % 2 else "even"}}
    for i in range(7)
]


@pytest.fixture
def tagged(vela_url: str, unique: Callable[[str], str]) -> str:
    name = unique("tagged")
    with VelaClient(vela_url, api_key=API_KEY) as vela:
        vela.index(name, DOCS, schema={"n": "integer", "tag": "keyword"}, wait=True)
    return name


def test_facet_counts_values_under_a_filter(client: VelaClient, tagged: str) -> None:
    got = client.facet(tagged, "tag")
    assert isinstance(got, Facet)
    assert got.hits == [FacetHit(value="even", count=4), FacetHit(value="odd", count=3)] and got.distinct_values == 2
    small = client.facet(tagged, "n", filter={"must": [{"key": "tag", "match": {"value": "odd"}}]}, limit=2)
    assert [(h.value, h.count) for h in small.hits] == [(1, 1), (3, 1)] and small.distinct_values == 3


def test_facet_errors(client: VelaClient, tagged: str) -> None:
    with pytest.raises(InvalidRequest) as undeclared:
        client.facet(tagged, "colour")
    assert undeclared.value.code == "invalid_facet"
    with pytest.raises(InvalidRequest) as limit:
        client.facet(tagged, "tag", limit=0)
    assert limit.value.code == "invalid_request"
    with pytest.raises(NotFound):
        client.facet("no-such-collection", "tag")


def test_recommend_finds_like_documents_and_names_missing_ones(client: VelaClient, tagged: str) -> None:
    got = client.recommend(
        tagged, ["d1"], unlike=["d2"], k=3, filter={"must": [{"key": "tag", "match": {"value": "odd"}}]}
    )
    ids = [h.id for h in got.hits]
    assert sorted(ids) == ["d3", "d5"]  # the odd ones but d1 itself
    assert all(h.metadata["tag"] == "odd" for h in got.hits)
    with pytest.raises(TypeError, match="not one string"):  # before anything is sent
        client.recommend(tagged, "d1")
    with pytest.raises(NotFound) as missing:
        client.recommend(tagged, ["nope"])
    assert missing.value.code == "document_not_found"
