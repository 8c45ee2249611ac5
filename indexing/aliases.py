"""Collection aliases: a name that points at one collection, switched in one atomic step.

All aliases of a data directory are one small JSON file, `<data dir>/aliases.json`, replaced whole by
`write_atomic` under a file lock, so every process (API workers, `vela worker`) sees the same aliases and a
reader sees the file before a switch or after it, never half of one. It is read on every lookup (a few
microseconds): a switch made by another process counts from its rename, with no cache to go stale.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from velaio.files import file_lock, write_atomic

ALIASES_FILE = "aliases.json"
LOCK_FILE = "aliases.lock"


class AliasNotFound(KeyError):
    pass


class AliasConflict(ValueError):
    """An alias may not take a collection's name (nor a collection an alias's)."""


class AliasLimitExceeded(ValueError):
    """A new alias would pass the data directory's cap (VELA_MAX_ALIASES): nothing is written."""


class NotACollection(LookupError):
    """An alias must point at an existing collection (not at another alias)."""


class AliasStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / ALIASES_FILE
        self._lock = data_dir / LOCK_FILE

    def all(self) -> dict[str, str]:
        """Every alias and the collection it points at."""
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        aliases = data.get("aliases") if isinstance(data, dict) else None
        if not isinstance(aliases, dict):
            raise ValueError(f"{self.path} is not an aliases file")
        return {str(k): str(v) for k, v in aliases.items()}

    def target(self, alias: str) -> str | None:
        """The collection `alias` points at; None when it is not an alias."""
        return self.all().get(alias)

    def _write(self, aliases: dict[str, str]) -> None:
        body = {"version": 1, "aliases": dict(sorted(aliases.items()))}
        write_atomic(self.path, (json.dumps(body, indent=2) + "\n").encode())

    def put(
        self, alias: str, collection: str, *, is_collection: Callable[[str], bool], limit: int | None = None
    ) -> bool:
        """Point `alias` at `collection` (created, or switched in one rename); True when it is new.

        `is_collection(name)`: whether a collection of that name exists (the store's check, not alias-aware).
        `limit`: most aliases there may be; a new one past it is AliasLimitExceeded (a switch always goes through).
        Counted under the file lock, so processes creating aliases at once cannot pass it together."""
        with file_lock(self._lock):
            if is_collection(alias):
                raise AliasConflict(f"{alias!r} is a collection's name; an alias needs a name of its own")
            aliases = self.all()
            if collection in aliases:
                raise NotACollection(f"{collection!r} is an alias: point an alias at a collection")
            if not is_collection(collection):
                raise NotACollection(f"no collection named {collection!r}")
            new = alias not in aliases
            if new and limit is not None and len(aliases) >= limit:
                raise AliasLimitExceeded(
                    f"the data directory holds {len(aliases)} aliases, its limit (VELA_MAX_ALIASES): delete one, "
                    "switch an existing one, or raise the limit"
                )
            if aliases.get(alias) != collection:
                self._write({**aliases, alias: collection})
            return new

    def remove(self, alias: str) -> str:
        """Delete an alias (not its collection); the collection it pointed at."""
        with file_lock(self._lock):
            aliases = self.all()
            if alias not in aliases:
                raise AliasNotFound(alias)
            collection = aliases.pop(alias)
            self._write(aliases)
            return collection

    def remove_targeting(self, collection: str) -> list[str]:
        """Delete every alias of `collection` (it is being deleted: no alias is left pointing at nothing)."""
        with file_lock(self._lock):
            aliases = self.all()
            gone = sorted(a for a, c in aliases.items() if c == collection)
            if gone:
                self._write({a: c for a, c in aliases.items() if c != collection})
            return gone
