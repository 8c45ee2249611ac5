"""`AsyncVelaClient`'s snapshot methods: back a collection up to a tar the server keeps, list, download and delete
those tars, restore one into a new collection, and upload one (taken on any server) to restore it. Taking and
restoring are jobs; with `wait=True` the methods wait for them (`_submit`). Tars are streamed, never held in memory,
and the file work (reads, writes, hashing) runs in worker threads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, overload

import anyio

from vela_client import snapshot_calls as calls
from vela_client.bases import AsyncBase
from vela_client.models import Job, JobAccepted, Snapshot
from vela_client.transfers import DownloadTarget, download_path, file_sha256
from vela_client.waiting import AsyncProgressCallback, check_wait_options


class AsyncSnapshotsMixin(AsyncBase):
    """Snapshots of collections, for `AsyncVelaClient`."""

    @overload
    async def create_snapshot(self, collection: str, *, wait: Literal[False] = False) -> JobAccepted: ...

    @overload
    async def create_snapshot(
        self,
        collection: str,
        *,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def create_snapshot(
        self,
        collection: str,
        *,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Take a snapshot of the collection (of the one an alias points at) through a job, like `index`. The job's
        `result` names it (`snapshot`) with its `bytes`, `documents` and `sha256`. Searches go on meanwhile."""
        return await self._submit(calls.create_snapshot(collection), wait, on_progress, timeout)

    async def list_snapshots(self, collection: str) -> list[Snapshot]:
        """The collection's snapshots, newest first; a deleted collection's are still listed under its name."""
        return await self._send(calls.list_snapshots(collection))

    async def download_snapshot(self, collection: str, snapshot: str, path: str | os.PathLike[str]) -> Path:
        """Download a snapshot to `path` (a file, or a folder to put it in under its own name) and return where it
        is. Streamed into a temporary file beside it, checked against the listing's sha256 (ChecksumMismatch), then
        renamed into place: a download that fails leaves nothing at `path`, nor beside it."""
        listed = {s.name: s.sha256 for s in await self.list_snapshots(collection)}
        target = DownloadTarget(download_path(path, snapshot), expected_sha256=listed.get(snapshot))
        try:
            await self._send(calls.download_snapshot(collection, snapshot, target))
            return await anyio.to_thread.run_sync(target.finish)
        finally:
            target.discard()  # not awaited: it must run even when this task is being cancelled

    async def delete_snapshot(self, collection: str, snapshot: str) -> None:
        """Delete a snapshot from the server; SnapshotNotFound when the listing has none of that name."""
        return await self._send(calls.delete_snapshot(collection, snapshot))

    @overload
    async def restore_snapshot(
        self, collection: str, snapshot: str, *, into: str, wait: Literal[False] = False
    ) -> JobAccepted: ...

    @overload
    async def restore_snapshot(
        self,
        collection: str,
        snapshot: str,
        *,
        into: str,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def restore_snapshot(
        self,
        collection: str,
        snapshot: str,
        *,
        into: str,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Make the new collection `into` from a snapshot through a job: it appears whole when the job succeeds,
        or not at all. Conflict when `into` is a collection or an alias; InvalidRequest (`unknown_model`) when the
        snapshot's model is not on this server."""
        return await self._submit(calls.restore_snapshot(collection, snapshot, into), wait, on_progress, timeout)

    @overload
    async def upload_snapshot(
        self, path: str | os.PathLike[str], *, into: str, sha256: str | None = None, wait: Literal[False] = False
    ) -> JobAccepted: ...

    @overload
    async def upload_snapshot(
        self,
        path: str | os.PathLike[str],
        *,
        into: str,
        sha256: str | None = None,
        wait: Literal[True],
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Job: ...

    async def upload_snapshot(
        self,
        path: str | os.PathLike[str],
        *,
        into: str,
        sha256: str | None = None,
        wait: bool = False,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
    ) -> JobAccepted | Job:
        """Send a downloaded snapshot (from this server or another), streamed, and restore it as the new collection
        `into`, as `restore_snapshot` does. The server checks the tar against `sha256` (the listing's, say); left
        out, the file's own is computed first, so that a tar damaged on the way fails its restore."""
        check_wait_options(wait=wait, on_progress=on_progress, timeout=timeout)  # before a large file is read
        source = Path(path)
        digest = sha256 if sha256 is not None else await anyio.to_thread.run_sync(file_sha256, source)
        return await self._submit(calls.upload_snapshot(source, into=into, sha256=digest), wait, on_progress, timeout)
