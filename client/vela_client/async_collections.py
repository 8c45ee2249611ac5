"""`AsyncVelaClient`'s collection-level methods: list, get and delete collections; their generations (reindex with
another embedder, promote, roll back); the models requests may name; and aliases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

from vela_client import calls
from vela_client.bases import AsyncBase
from vela_client.models import Alias, Collection, Job, JobAccepted, Model
from vela_client.waiting import AsyncProgressCallback


class AsyncCollectionsMixin(AsyncBase):
    """Collections, generations, models and aliases, for `AsyncVelaClient`."""

    # Collections

    async def list_collections(self) -> list[Collection]:
        return await self._send(calls.list_collections())

    async def get_collection(self, name: str) -> Collection:
        """Counts, embedder, dims and index sizes; NotFound (`collection_not_found`) when there is none."""
        return await self._send(calls.get_collection(name))

    async def create_collection(
        self,
        name: str,
        *,
        embedder: str | None = None,
        shards: int | None = None,
        schema: Mapping[str, str] | None = None,
        strict: bool = False,
    ) -> Collection:
        """Make an empty collection with these settings before any document (`PUT /collections/{name}`; `schema`
        and `strict` as `index` takes them): the collection as `get_collection` shows it. One of that name with the
        same settings is returned as it is; other settings, or an alias's name, raise Conflict."""
        return await self._send(
            calls.create_collection(name, embedder=embedder, shards=shards, schema=schema, strict=strict)
        )

    async def collection_exists(self, name: str) -> bool:
        """Whether there is a collection (or an alias) of this name: `HEAD /collections/{name}`, no body read."""
        return await self._send(calls.collection_exists(name))

    async def delete_collection(self, name: str) -> None:
        """Delete a collection, its documents and indexes (its pending jobs are cancelled); by its own name, not an
        alias (409)."""
        return await self._send(calls.delete_collection(name))

    # Generations: another embedder for a collection, without downtime

    @overload
    async def reindex(
        self,
        collection: str,
        embedder: str,
        *,
        chunking: Mapping[str, int] | None = None,
        promote: Literal["auto", "manual"] = "auto",
        gate: Mapping[str, Any] | None = None,
        reencode: bool = False,
        wait: Literal[False] = False,
    ) -> JobAccepted: ...

    @overload
    async def reindex(
        self,
        collection: str,
        embedder: str,
        *,
        chunking: Mapping[str, int] | None = None,
        promote: Literal["auto", "manual"] = "auto",
        gate: Mapping[str, Any] | None = None,
        reencode: bool = False,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def reindex(
        self,
        collection: str,
        embedder: str,
        *,
        chunking: Mapping[str, int] | None = None,
        promote: Literal["auto", "manual"] = "auto",
        gate: Mapping[str, Any] | None = None,
        reencode: bool = False,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Build a new generation of the collection with another embedder (a registry name) while it serves;
        promoted when built (and gated: {"dataset" | "queries" + "qrels", "mode", "tolerance"}), or waiting for
        `promote` with promote="manual". A model that encodes documents as the current one does (a `vela adapt`
        model) gets the stored vectors copied; reencode=True encodes every document regardless. The job's `result`
        has the gate's NDCG@10 figures and how many documents were embedded or copied."""
        call = calls.reindex(collection, embedder, chunking, promote, gate, reencode)
        return await self._submit(call, wait, on_progress, timeout)

    @overload
    async def promote(self, collection: str, *, wait: Literal[False] = False) -> JobAccepted: ...

    @overload
    async def promote(
        self,
        collection: str,
        *,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def promote(
        self,
        collection: str,
        *,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Switch searches to the generation a manual reindex finished; Conflict when none waits."""
        return await self._submit(calls.promote(collection), wait, on_progress, timeout)

    @overload
    async def rollback(self, collection: str, *, wait: Literal[False] = False) -> JobAccepted: ...

    @overload
    async def rollback(
        self,
        collection: str,
        *,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def rollback(
        self,
        collection: str,
        *,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Switch searches back to the previous generation (kept until a promotion replaces it); Conflict when none."""
        return await self._submit(calls.rollback(collection), wait, on_progress, timeout)

    # Models and aliases

    async def list_models(self) -> list[Model]:
        """The models requests may name (the built-in `default` first), with their kind, dims and recorded evals."""
        return await self._send(calls.list_models())

    async def list_aliases(self) -> list[Alias]:
        return await self._send(calls.list_aliases())

    async def get_alias(self, alias: str) -> Alias:
        """The collection an alias points at; NotFound (`alias_not_found`) when there is none."""
        return await self._send(calls.get_alias(alias))

    async def set_alias(self, alias: str, collection: str) -> Alias:
        """Point an alias at a collection: created, or switched atomically (searches through it see the old
        collection or the new one). Conflict when a collection has the alias's name."""
        return await self._send(calls.set_alias(alias, collection))

    async def delete_alias(self, alias: str) -> None:
        """Remove an alias; its collection stays."""
        return await self._send(calls.delete_alias(alias))
