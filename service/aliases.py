"""Domain functions behind /aliases (keyword-only; no HTTP here). The aliases themselves live in the collection
store (indexing/aliases.py), which follows them on every lookup by name."""

from __future__ import annotations

from indexing.aliases import AliasConflict, AliasLimitExceeded, AliasNotFound, NotACollection
from indexing.jobs import JobKind
from service.state import AppState


def put_alias(*, state: AppState, alias: str, collection: str) -> bool:
    """Point `alias` at `collection`, creating or switching it in one atomic step; True when it is new.
    AliasConflict for a collection's name, or a name a restore under way will make into one (the name is the
    restore's from the moment it was accepted, as for `POST /index`). AliasLimitExceeded for a new alias past
    VELA_MAX_ALIASES."""
    restoring = state.jobs.unfinished_of(alias, frozenset({JobKind.RESTORE}))
    if restoring is not None:
        raise AliasConflict(f"a restore into {alias!r} is under way (job {restoring}): the name is taken")
    store = state.collections
    return store.aliases.put(alias, collection, is_collection=store.is_collection, limit=state.settings.max_aliases)


def get_alias(*, state: AppState, alias: str) -> str:
    """The collection `alias` points at (AliasNotFound when it is not an alias)."""
    target = state.collections.aliases.target(alias)
    if target is None:
        raise AliasNotFound(alias)
    return target


def list_aliases(*, state: AppState) -> dict[str, str]:
    return dict(sorted(state.collections.aliases.all().items()))


def delete_alias(*, state: AppState, alias: str) -> str:
    """Remove an alias (its collection stays); the collection it pointed at."""
    return state.collections.aliases.remove(alias)


__all__ = [
    "AliasConflict",
    "AliasLimitExceeded",
    "AliasNotFound",
    "NotACollection",
    "delete_alias",
    "get_alias",
    "list_aliases",
    "put_alias",
]
