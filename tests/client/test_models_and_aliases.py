"""Models and aliases through both clients against a real server: the registry listing, and aliases created,
read, switched, searched through and deleted, with each failure as the right exception."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from vela_client import Alias, Conflict, InvalidRequest, Model, NotFound, VelaClient


def test_list_models_starts_with_the_builtin_default(client: VelaClient) -> None:
    models = client.list_models()
    assert models and all(isinstance(m, Model) for m in models)
    default = models[0]
    assert (default.name, default.kind, default.dims, default.builtin) == ("default", "embedder", 384, True)
    assert "minilm" in default.aliases and default.evals == []


def test_aliases(client: VelaClient, unique: Callable[[str], str]) -> None:
    first, second, alias = unique("first"), unique("second"), unique("alias")
    client.index(first, [{"id": "one", "text": "tides and the moon"}], wait=True)
    client.index(second, [{"id": "two", "text": "tides and the moon"}], wait=True)
    assert client.set_alias(alias, first) == Alias(alias=alias, collection=first)
    assert client.get_alias(alias).collection == first
    assert Alias(alias=alias, collection=first) in client.list_aliases()
    assert [h.id for h in client.search(alias, "moon", mode="bm25").hits] == ["one"]
    client.set_alias(alias, second)  # a switch
    assert [h.id for h in client.search(alias, "moon", mode="bm25").hits] == ["two"]
    assert client.get_collection(alias).name == second
    client.delete_alias(alias)
    with pytest.raises(NotFound) as gone:
        client.get_alias(alias)
    assert gone.value.code == "alias_not_found"
    with pytest.raises(NotFound):
        client.delete_alias(alias)
    with pytest.raises(Conflict):
        client.set_alias(first, second)  # a collection's name
    with pytest.raises(NotFound) as missing:
        client.set_alias(alias, unique("nowhere"))
    assert missing.value.code == "collection_not_found"
    with pytest.raises(InvalidRequest):
        client.set_alias(".bad", first)


def test_an_unregistered_embedder_is_invalid_request(client: VelaClient, unique: Callable[[str], str]) -> None:
    with pytest.raises(InvalidRequest) as err:
        client.index(unique("bad"), [{"id": "a", "text": "x"}], embedder="../models")
    assert err.value.code == "unknown_model" and err.value.status == 422
    assert "no registered model of that name" in err.value.message
