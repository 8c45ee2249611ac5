"""Two first writes to a new name at once: the one that comes second finds the collection the other made (in this
process or another) and is held to the same rule as a later request, refused when it asked for other shards or
another schema, never accepted with its setting dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexing.collection import CollectionConflict
from service.documents import get_or_create_collection
from tests.service.conftest import running_app


def _made_meanwhile(state: Any, monkeypatch: pytest.MonkeyPatch, *, shards: int) -> list[bool]:
    """The collection exists with `shards` shards, but each request's first look saw no collection yet: what
    `exists` answers next is popped from the list returned (then it answers as it is)."""
    get_or_create_collection(state=state, name="new", embedder=None, shards=shards)
    real = state.collections.exists
    answers: list[bool] = []
    monkeypatch.setattr(state.collections, "exists", lambda name: answers.pop(0) if answers else real(name))
    return answers


def test_a_first_write_that_lost_the_race_is_held_to_the_winners_settings(
    tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_app(tmp_path, embedder=str(tiny_embedder_dir)) as (_, app):
        state = app.state.vela
        first_look = _made_meanwhile(state, monkeypatch, shards=2)
        first_look.append(False)
        with pytest.raises(CollectionConflict, match="already has 2 shard"):
            get_or_create_collection(state=state, name="new", embedder=None, shards=3)
        schema = {"fields": {"year": "integer"}, "strict": False}
        first_look.append(False)
        with pytest.raises(CollectionConflict, match="another schema"):
            get_or_create_collection(state=state, name="new", embedder=None, schema=schema)
        # What agrees (or asks nothing) is the collection the other request made.
        first_look.append(False)
        assert get_or_create_collection(state=state, name="new", embedder=None, shards=2).settings.shards == 2
        first_look.append(False)
        with pytest.raises(CollectionConflict, match="already uses embedder 'unregistered'"):  # a name, no path
            get_or_create_collection(state=state, name="new", embedder="default")
        assert first_look == []
        monkeypatch.undo()
        assert state.collections.get("new").settings.shards == 2
