"""A collection name is the whole string matching the name pattern: a trailing newline (which `$` lets through
with `re.match`) makes it no name, for the validation and for every lookup in the store's directory."""

from __future__ import annotations

import pytest

from indexing.collection import SETTINGS_FILE, CollectionNotFound, validate_name
from indexing.store import CollectionStore


@pytest.mark.parametrize("name", ["c\n", "notes\n", "a\nb", "\nc"])
def test_a_name_with_a_newline_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="collection name must be"):
        validate_name(name)


def test_a_plain_name_is_taken_as_it_is() -> None:
    assert validate_name("notes-2024.v1") == "notes-2024.v1"


def test_a_directory_named_with_a_trailing_newline_is_no_collection(store: CollectionStore) -> None:
    folder = store.root / "c\n"  # put there by hand: the store never makes one
    folder.mkdir()
    (folder / SETTINGS_FILE).write_text("{}")
    assert store.names() == [] and not store.is_collection("c\n")
    with pytest.raises(CollectionNotFound):
        store.get("c\n")
