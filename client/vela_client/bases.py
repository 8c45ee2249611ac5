"""What the resource mixins call on their client: `SyncBase` for `VelaClient`'s, `AsyncBase` for `AsyncVelaClient`'s.

Each client inherits its base through its mixins (sync_documents.py, sync_collections.py, sync_snapshots.py,
sync_bulk.py and their async twins) and defines `_send` (one request, with retries), `_submit` (a write that starts
a job, then maybe waits for it) and `wait_job`; the stubs here only give the mixins those signatures to type-check
against.
"""

from __future__ import annotations

from typing import TypeVar

from vela_client.models import Job, JobAccepted
from vela_client.routes import Call
from vela_client.waiting import AsyncProgressCallback, JobRef, ProgressCallback

T = TypeVar("T")


class SyncBase:
    """The transport `VelaClient` gives its mixins."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def _submit(
        self, call: Call[JobAccepted], wait: bool, on_progress: ProgressCallback | None, timeout: float | None
    ) -> JobAccepted | Job:
        raise NotImplementedError

    def wait_job(
        self,
        job: JobRef,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
        poll_interval: float = 0.5,
        check: bool = True,
    ) -> Job:
        raise NotImplementedError


class AsyncBase:
    """The transport `AsyncVelaClient` gives its mixins."""

    async def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    async def _submit(
        self, call: Call[JobAccepted], wait: bool, on_progress: AsyncProgressCallback | None, timeout: float | None
    ) -> JobAccepted | Job:
        raise NotImplementedError

    async def wait_job(
        self,
        job: JobRef,
        *,
        on_progress: AsyncProgressCallback | None = None,
        timeout: float | None = None,
        poll_interval: float = 0.5,
        check: bool = True,
    ) -> Job:
        raise NotImplementedError
