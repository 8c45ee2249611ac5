"""`create_collection` and `get_documents` through both clients against a real server."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from vela_client import Conflict, Documents, NotFound, VelaClient


def test_create_collection_makes_an_empty_one_and_the_same_call_again_returns_it(
    client: VelaClient, unique: Callable[[str], str]
) -> None:
    name = unique("made")
    made = client.create_collection(name, shards=2, schema={"tenant": "keyword"}, strict=True)  # as index takes it
    assert (made.name, made.documents, made.shards) == (name, 0, 2)
    assert made.schema_ == {"fields": {"tenant": "keyword"}, "strict": True}
    assert client.create_collection(name, shards=2).name == name  # the same settings: the one there
    with pytest.raises(Conflict):
        client.create_collection(name, shards=3)
    client.index(name, [{"id": "a", "text": "otters", "metadata": {"tenant": "t"}}], wait=True)
    assert client.get_collection(name).documents == 1
    client.delete_collection(name)


def test_get_documents_reads_many_by_id(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("many")
    client.index(name, [{"id": f"d{i}", "text": f"river {i}", "metadata": {"i": i}} for i in range(4)], wait=True)
    got = client.get_documents(name, ["d2", "gone", "d0"])
    assert isinstance(got, Documents)
    assert [d.id for d in got.documents] == ["d2", "d0"] and got.not_found == ["gone"]
    assert got.documents[0].metadata == {"i": 2} and got.documents[0].passages is None
    full = client.get_documents(name, iter(["d1"]), passages=True)
    assert full.documents[0].passages and full.documents[0].text == "river 1"
    with pytest.raises(NotFound):
        client.get_documents(unique("missing"), ["d0"])
    with pytest.raises(TypeError, match="not one string"):
        client.get_documents(name, "d0")
    client.delete_collection(name)


def test_searches_and_recommendations_carry_what_is_asked(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("parts")
    docs = [{"id": f"d{i}", "text": f"river otters {i}", "metadata": {"i": i, "tag": "x"}} for i in range(4)]
    client.index(name, docs, wait=True)
    hits = client.search(name, "otters", with_text=False, with_metadata=["i"]).hits
    assert hits and all(h.text == "" and set(h.metadata) == {"i"} for h in hits)
    liked = client.recommend(name, ["d0"], with_metadata=False).hits
    assert liked and all(h.metadata == {} and h.text for h in liked)
    client.delete_collection(name)
